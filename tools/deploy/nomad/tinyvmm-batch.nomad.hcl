# Research runs: a parameterized batch job, one tinyvmm job per dispatch,
# its result one JSON object (tinyvmm run --json) in the allocation's log.
#   nomad job run tinyvmm-batch.nomad.hcl
#   for i in $(seq 0 99); do nomad job dispatch -meta task=$i tinyvmm-batch; done
# Nomad places, retries and keeps the logs; nothing here schedules.
job "tinyvmm-batch" {
  type        = "batch"
  datacenters = ["*"]

  parameterized {
    meta_required = ["task"]
  }

  constraint {
    attribute = "${meta.kvm}"
    value     = "true"
  }

  group "run" {
    reschedule {
      attempts  = 2
      unlimited = false
    }

    task "tinyvmm-run" {
      driver = "raw_exec"

      config {
        command = "/usr/local/bin/tinyvmm"
        args = ["run", "--json", "--timeout", "600", "--", "python3", "-c",
                "import sys; print(int(sys.argv[1]) ** 2)", "${NOMAD_META_task}"]
      }

      resources {
        cpu    = 1000
        memory = 512 # the guest's 256 MiB and the VMM's allowance
      }
    }
  }
}
