# tinyvmm serve on every KVM client of the cluster: a Nomad system job
# (one allocation per eligible node; Nomad restarts it where it dies).
# Nodes opt in with `meta { kvm = "true" }` in their client config and a
# readable /dev/kvm. The daemon listens on the host's
# /run/tinyvmm/api.sock; backends on that host reach it there (see
# ../README.md for reaching it from elsewhere).
job "tinyvmm-serve" {
  type        = "system"
  datacenters = ["*"]

  constraint {
    attribute = "${meta.kvm}"
    value     = "true"
  }

  group "serve" {
    restart {
      attempts = 10
      interval = "10m"
      delay    = "5s"
      mode     = "delay"
    }

    task "tinyvmm-serve" {
      # raw_exec: the daemon jails each VMM itself (namespaces, Landlock,
      # seccomp, cgroups) and needs root for that; a container driver
      # would have to be privileged anyway.
      driver = "raw_exec"

      config {
        command = "/usr/local/bin/tinyvmm"
        args = ["serve", "--socket", "/run/tinyvmm/api.sock", "--state-dir", "/var/lib/tinyvmm/serve",
                "--socket-mode", "0660", "--socket-group", "tinyvmm",
                "--max-sandboxes", "64", "--max-per-owner", "16"]
      }

      # SIGTERM: the daemon stops accepting and leaves its sandboxes for
      # the next one, which re-adopts them from the state directory.
      kill_signal  = "SIGTERM"
      kill_timeout = "20s"

      resources {
        cpu    = 500 # MHz for the daemon itself; the VMMs are limited by their own cgroups
        memory = 256
      }
    }
  }
}
