/* The agent's PID 1 duties: pseudo file systems, console, hostname, lo,
 * kernel command line, SEED (RNG + clock) and SHUTDOWN (reset). */
#include "guest/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <linux/random.h>

#define DEFAULT_HOSTNAME "tinyvmm"

static const struct {
	const char *dir, *type, *data;
	unsigned long flags;
} mounts[] = {
	{ "/proc", "proc", NULL, MS_NOSUID | MS_NODEV | MS_NOEXEC },
	{ "/sys", "sysfs", NULL, MS_NOSUID | MS_NODEV | MS_NOEXEC },
	{ "/dev", "devtmpfs", "mode=0755", MS_NOSUID },
	{ "/dev/shm", "tmpfs", "mode=1777", MS_NOSUID | MS_NODEV },
	{ "/tmp", "tmpfs", "mode=1777", MS_NOSUID | MS_NODEV },
	{ "/run", "tmpfs", "mode=0755", MS_NOSUID | MS_NODEV },
};

static const char *const dev_links[][2] = {
	{ "/proc/self/fd", "/dev/fd" },
	{ "/proc/self/fd/0", "/dev/stdin" },
	{ "/proc/self/fd/1", "/dev/stdout" },
	{ "/proc/self/fd/2", "/dev/stderr" },
};

static void mount_all(void)
{
	for (size_t i = 0; i < sizeof(mounts) / sizeof(mounts[0]); i++) {
		const char *dir = mounts[i].dir;
		int rc = mount(mounts[i].type, dir, mounts[i].type, mounts[i].flags, mounts[i].data);

		/* Mount points are made only when missing: syscalls are dear here. */
		if (rc < 0 && errno == ENOENT && mkdir(dir, 0755) == 0)
			rc = mount(mounts[i].type, dir, mounts[i].type, mounts[i].flags, mounts[i].data);
		if (rc < 0 && errno != EBUSY) /* EBUSY: the kernel mounted it (devtmpfs.mount) */
			agent_log("mount %s: %s", dir, strerror(errno));
	}
	for (size_t i = 0; i < sizeof(dev_links) / sizeof(dev_links[0]); i++)
		if (symlink(dev_links[i][0], dev_links[i][1]) < 0 && errno != EEXIST)
			agent_log("symlink %s: %s", dev_links[i][1], strerror(errno));
}

/* fds 0-2 on the console (or /dev/null), so that our own sockets and pipes
 * never take those numbers. */
static void console_fds(void)
{
	int fd = -1;

	for (int i = 0; i < 3; i++) {
		if (fcntl(i, F_GETFD) >= 0)
			continue;
		if (fd < 0)
			fd = open("/dev/console", O_RDWR | O_NOCTTY);
		if (fd < 0)
			fd = open("/dev/null", O_RDWR);
		if (fd >= 0 && fd != i)
			dup2(fd, i);
	}
	if (fd > 2)
		close(fd);
}

static void lo_up(void)
{
	struct ifreq ifr = { .ifr_name = "lo" };
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0) {
		agent_log("lo: %s", strerror(errno));
	} else {
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
			agent_log("lo up: %s", strerror(errno));
	}
	if (s >= 0)
		close(s);
}

/* The links and shared files a job may plant for a root process (the
 * agent's file requests, a job as root) are followed only as systemd's
 * distributions set it up: no hard link to a file one may not write, no
 * symlink of another user's followed in a sticky directory, no FIFO or
 * regular file of another user's opened with O_CREAT there (the kernel's
 * defaults are 0: helper-68 linked root's files). */
static void fs_protections(void)
{
	char comm[16] = "";
	int cfd = open("/proc/2/comm", O_RDONLY | O_CLOEXEC);
	static const char *const knobs[][2] = {
		{ "/proc/sys/fs/protected_hardlinks", "1" },
		{ "/proc/sys/fs/protected_symlinks", "1" },
		{ "/proc/sys/fs/protected_fifos", "1" },
		{ "/proc/sys/fs/protected_regular", "2" },
	};

	/* Only as a kernel's own init (its kthreadd is PID 2): /proc/sys/fs
	 * is not a namespace's, and the agent as PID 1 of a test's pid
	 * namespace (tests/test_agent.c) must leave the host's alone. */
	if (cfd >= 0 && read(cfd, comm, sizeof(comm) - 1) < 0)
		comm[0] = 0;
	if (cfd >= 0)
		close(cfd);
	if (strcmp(comm, "kthreadd\n"))
		return;
	for (size_t i = 0; i < sizeof(knobs) / sizeof(knobs[0]); i++) {
		int fd = open(knobs[i][0], O_WRONLY | O_CLOEXEC);

		if (fd < 0 || write(fd, knobs[i][1], 1) != 1)
			agent_log("%s: %s", knobs[i][0], strerror(errno));
		if (fd >= 0)
			close(fd);
	}
}

void sys_pid1_setup(void)
{
	char host[65];

	mount_all();
	console_fds();
	fs_protections();
	jobcg_setup();
	/* Ahead of the jobs (which start at nice 0 again): a job that loads
	 * every CPU, a fork bomb held at its pids limit, must not keep the
	 * agent from its timers, the timeout's kill among them. */
	if (setpriority(PRIO_PROCESS, 0, AGENT_NICE) < 0)
		agent_log("setpriority: %s", strerror(errno));
	/* Before the first job, which may want the room. */
	disk_grow_root();
	if (!sys_cmdline_get("tinyvmm.hostname", host, sizeof(host)) || !*host)
		strcpy(host, DEFAULT_HOSTNAME);
	if (sethostname(host, strlen(host)) < 0)
		agent_log("sethostname: %s", strerror(errno));
	lo_up();
	net_setup_from_cmdline();
}

bool sys_cmdline_get(const char *key, char *val, size_t len)
{
	static char cmdline[4096];
	static bool loaded;
	size_t klen = strlen(key);
	const char *p;

	if (!loaded) {
		int fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC);
		ssize_t n = fd >= 0 ? read(fd, cmdline, sizeof(cmdline) - 1) : -1;

		cmdline[n > 0 ? n : 0] = 0;
		if (fd >= 0)
			close(fd);
		loaded = true;
	}
	for (p = cmdline; *p; p += strcspn(p, " \n")) {
		p += strspn(p, " \n");
		if (!strncmp(p, key, klen) && p[klen] == '=') {
			size_t n = strcspn(p + klen + 1, " \n");

			if (n >= len)
				return false;
			memcpy(val, p + klen + 1, n);
			val[n] = 0;
			return true;
		}
	}
	return false;
}

void sys_seed(struct conn *c, const struct tvp_msg *m)
{
	const struct tvp_seed *s = &m->seed;
	/* struct rand_pool_info with room for the bytes. */
	struct {
		int entropy_count, buf_size;
		uint8_t buf[TVP_MAX_ENTROPY];
	} __attribute__((aligned(4))) pool;
	struct timespec ts;
	const char *what = NULL;
	int fd, err = 0;

	if (!ag.system) {
		conn_send_ok(c, m->id, TVP_SEED, 0); /* a test agent leaves the host's RNG and clock alone */
		return;
	}
	if (s->entropy.len) {
		pool.entropy_count = (int)s->entropy.len * 8;
		pool.buf_size = (int)s->entropy.len;
		memcpy(pool.buf, s->entropy.p, s->entropy.len); /* parse checked len <= TVP_MAX_ENTROPY */
		fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC);
		if (fd < 0 || ioctl(fd, RNDADDENTROPY, &pool) < 0) {
			what = "RNDADDENTROPY";
			err = errno;
		} else if (ioctl(fd, RNDRESEEDCRNG) < 0 && errno != ENODATA) {
			/* Mixing alone leaves the CRNG's current key in use
			 * until its next timed reseed: every VM restored from
			 * one snapshot would read the same bytes until then. */
			what = "RNDRESEEDCRNG";
			err = errno;
		}
		if (fd >= 0)
			close(fd);
	}
	if (!what && s->realtime_ns) {
		ts.tv_sec = (time_t)(s->realtime_ns / 1000000000u);
		ts.tv_nsec = (long)(s->realtime_ns % 1000000000u);
		if (clock_settime(CLOCK_REALTIME, &ts) < 0) {
			what = "clock_settime";
			err = errno;
		}
	}
	if (what)
		conn_send_error(c, m->id, TVP_ERR_SYSTEM, err, "%s: %s", what, strerror(err));
	else
		conn_send_ok(c, m->id, TVP_SEED, 1);
}

void sys_shutdown(void)
{
	agent_log("shutdown");
	kill(-1, SIGKILL); /* no job writes after the sync */
	sync();
	reboot(RB_AUTOBOOT);
	agent_log("reboot: %s", strerror(errno));
}
