/* Template snapshots made for the user: a job that would boot the default
 * way is restored instead from a snapshot of the same kernel, image and VM
 * shape (a network device too, when the guest is given no address at its
 * boot), made on first use and cached. Two runs racing to make one are
 * serialised by a lock file; a template is only ever seen complete (made
 * in a temporary directory, then renamed into place). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vmm/core/dir_remove.h"
#include "vmm/cli/cli.h"
#include "vmm/core/dir_trust.h"
#include "vmm/core/version.h"

#define DEFAULT_CACHE "/var/tmp/tinyvmm-cache"
/* What the template's guest runs once before the snapshot, so the page
 * cache a Python job needs is in it (harmless where there is no python3). */
static char *warmup_argv[] = { "/bin/sh", "-c", "python3 -c pass 2>/dev/null; true", NULL };

/* The lock file's fd, locked, when no run holds it; -1 when one does or
 * it cannot be told (then its folder is left alone): only a regular file
 * is a lock (no symlink followed, no device or FIFO opened for good). A
 * key with no lock file has had no run since the cache was cleaned:
 * nothing to wait for. */
static int take_idle_lock(const char *lock, bool *none)
{
	int fd = open(lock, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	struct stat st;

	*none = fd < 0 && errno == ENOENT;
	if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || flock(fd, LOCK_EX | LOCK_NB) < 0)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* A template's key: 32 lowercase hex digits (dir's name in
 * cli_template_use: two %016llx). */
static bool key_name(const char *s, size_t n)
{
	if (n != 32)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* Remove the "<key>.tmp-PID" folders of templates that no run is making:
 * dir's own (the caller holds its key's lock) and any other key's whose
 * lock no run holds. Those are left by runs killed while they made a
 * template, and a key of an older version or image would never be made
 * again to sweep them. Only names of that exact form are touched. An
 * other key's folder goes under its lock, so a run of that key cannot
 * start in between. */
static void remove_stale(const char *templates, const char *dir)
{
	const char *name = strrchr(dir, '/') + 1;
	char path[PATH_MAX + 256];
	struct dirent *de;
	DIR *d = opendir(templates);

	if (!d)
		return;
	while ((de = readdir(d))) {
		const char *t = strstr(de->d_name, ".tmp-");
		size_t n = t ? (size_t)(t - de->d_name) : 0;
		bool ours = n == strlen(name) && !strncmp(de->d_name, name, n), none = false;
		int fd = -1;

		if (!t || !key_name(de->d_name, n) || !t[5] || strspn(t + 5, "0123456789") != strlen(t + 5))
			continue;
		if (!ours) {
			snprintf(path, sizeof(path), "%s/%.32s.lock", templates, de->d_name);
			fd = take_idle_lock(path, &none);
			if (fd < 0 && !none)
				continue;
		}
		if (snprintf(path, sizeof(path), "%s/%s", templates, de->d_name) < (int)sizeof(path))
			dir_remove_flat(path);
		if (fd >= 0)
			close(fd);
	}
	closedir(d);
}

/* FNV-1a, 64 bits: a cache key, not a defence (the inputs are ours). */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ ((const uint8_t *)p)[i]) * 0x100000001b3ULL;
	return h;
}

/* A file's identity: a file replaced or rewritten changes the key; the
 * same file reached by another path (a symlink, the cache's own path)
 * keeps it. */
static int ident(char *buf, size_t cap, const char *path)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return -errno;
	snprintf(buf, cap, "%llu|%llu|%lld|%lld.%09ld;", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
		 (long long)st.st_size, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
	return 0;
}

/* A network the template can have: a named TAP (its template's VM uses
 * it, with no address and everything denied, before the run's own VM
 * does), and no address, route or MAC for the guest at its boot: whoever
 * runs it gives the restored guest those (the agent's NET, as `tinyvmm
 * serve` does). */
static int net_ok(const struct tvm_net *n)
{
	return !n->enabled || (n->tap && !n->guest_ip && !n->guest_gw && !n->mac);
}

static int eligible(const struct cli_args *a)
{
	const struct tvm_config *c = &a->c;

	/* A job, or a long-lived VM of the default image for `exec` (and
	 * `tinyvmm serve`'s sandboxes) reached through its vsock socket. */
	return (a->job.argv || (a->c.vsock_uds && a->default_root)) && !a->snapshot && !a->no_snapshot &&
	       net_ok(&c->net) && c->nr_drives == 1 && c->root_drive && c->drives[0].cow && !c->drives[0].read_only &&
	       !c->initrd_path && !c->cmdline_append && !a->user_cmdline;
}

int cli_template_use(struct cli_args *a, uint64_t t0_ns)
{
	char key[4 * PATH_MAX + 256], part[PATH_MAX + 128], dir[PATH_MAX], tmp[PATH_MAX + 32], lock[PATH_MAX + 8];
	char cache_abs[PATH_MAX - 64];
	const char *cache = getenv("TINYVMM_CACHE");
	uint64_t h1, h2;
	struct stat st;
	int fd, r;

	/* Not root, a jail is refused next in one line of its own: no
	 * template notice (nor the cache's permission error) before it. */
	if (!eligible(a) || (a->jail && geteuid() != 0))
		return 0;
	if (!cache || !*cache)
		cache = DEFAULT_CACHE;
	snprintf(key, sizeof(key), "v=%s;mem=%u;cpus=%u;cid=%u;quirks=%d;disk=%llu;net=%d,%u,%d;", TVM_VERSION,
		 a->c.mem_mib, a->c.cpus, a->c.vsock_cid, (int)a->c.quirks, (unsigned long long)a->c.drives[0].size,
		 a->c.net.enabled, a->c.net.mtu, a->c.net.no_offload);
	/* A kernel or image that is not there: the cold boot says so, once. */
	if (ident(part, sizeof(part), a->c.kernel_path))
		return 0;
	strncat(key, part, sizeof(key) - strlen(key) - 1);
	if (ident(part, sizeof(part), a->c.drives[0].path))
		return 0;
	strncat(key, part, sizeof(key) - strlen(key) - 1);
	if (ident(part, sizeof(part), "/proc/self/exe") == 0)
		strncat(key, part, sizeof(key) - strlen(key) - 1);
	h1 = fnv(0xcbf29ce484222325ULL, key, strlen(key));
	h2 = fnv(0x84222325cbf29ce4ULL, key, strlen(key));
	if (mkdir(cache, 0755) < 0 && errno != EEXIST) {
		fprintf(stderr, "tinyvmm: template snapshots: %s: %s; booting cold\n", cache, strerror(errno));
		return 0;
	}
	/* From here on the cache is reached by the path that was checked. */
	{
		const char *bad = part;

		if ((r = dir_path_trusted(cache, cache_abs, sizeof(cache_abs)))) {
			bad = cache_abs; /* the folder that failed */
		} else {
			snprintf(part, sizeof(part), "%s/templates", cache_abs);
			r = mkdir(part, 0755) < 0 && errno != EEXIST ? -errno : dir_trusted(part, true);
		}
		if (r) {
			fprintf(stderr,
				"tinyvmm: template snapshots: %s: %s (the cache and each folder above it must be yours "
				"or root's, not a symlink, and writable by no one else: above it, unless sticky); "
				"booting cold\n",
				bad, strerror(-r));
			return 0;
		}
	}
	cache = cache_abs;
	snprintf(dir, sizeof(dir), "%s/templates/%016llx%016llx", cache, (unsigned long long)h1,
		 (unsigned long long)h2);
	snprintf(lock, sizeof(lock), "%s.lock", dir);
	snprintf(tmp, sizeof(tmp), "%s/state", dir);
	if (stat(tmp, &st) == 0)
		goto use;
	if (access("/dev/kvm", R_OK | W_OK) < 0) /* none can be made (no lock file): the cold boot says why, once */
		return 0;
	fd = open(lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0644);
	if (fd < 0 || flock(fd, LOCK_EX) < 0) {
		fprintf(stderr, "tinyvmm: template snapshots: %s: %s; booting cold\n", lock, strerror(errno));
		if (fd >= 0)
			close(fd);
		return 0;
	}
	if (stat(tmp, &st) == 0) { /* made by the run we waited for */
		close(fd);
		goto use;
	}
	/* We hold the key's lock: a <dir>.tmp-PID is a run's that died
	 * making it (killed, crashed), never one still at work. */
	remove_stale(part, dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp-%d", dir, (int)getpid());
	fprintf(stderr,
		"tinyvmm: first run with this kernel, image and VM shape: booting once to make a template snapshot "
		"(later runs restore it; --no-snapshot boots cold)\n");
	{
		struct tvm_config c = a->c;
		struct cli_job warm = { .argv = warmup_argv, .uid = TVM_ID_DEFAULT, .gid = TVM_ID_DEFAULT, .quiet = 1 };

		/* The template belongs to no run: nothing of this run's I/O. */
		c.serial_out_fd = -1;
		c.serial_in_fd = -1;
		/* Its VMM lines (the host quirks notice) would come again with
		 * the run's own VM; its errors are said by cli_snapshot_make. */
		c.log_fd = -1;
		c.vsock_uds = NULL;
		c.ttl_ms = 0;
		c.idle_ms = 0;
		/* The run's own cgroup error would be said twice. */
		if (c.cgroup.mode == TVM_CGROUP_ON)
			c.cgroup.mode = TVM_CGROUP_AUTO;
		c.drives[0].overlay_path = NULL;
		c.drives[0].overlay_limit = 0;
		/* The run's rate limit is given again at the restore: the
		 * template boots at full speed and serves every limit. */
		c.drives[0].limit = (struct tvm_rate_limit){ 0 };
		/* Its NIC sends nothing: the run's policy comes at the restore. */
		c.net.nr_allow = 0;
		c.net.nr_dns = 0;
		c.net.deny_all = 1;
		c.net.rx = c.net.tx = (struct tvm_rate_limit){ 0 };
		/* The warm-up's JSON result would land on our stdout. */
		fflush(stdout);
		int saved = dup(1), devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (saved >= 0 && devnull >= 0)
			dup2(devnull, 1);
		r = cli_snapshot_make(&c, &warm, tmp, NULL, NULL, t0_ns, 1, a->jail ? &a->jail_opts : NULL);
		fflush(stdout);
		if (saved >= 0) {
			dup2(saved, 1);
			close(saved);
		}
		if (devnull >= 0)
			close(devnull);
	}
	if (!r && rename(tmp, dir) < 0)
		r = -errno;
	close(fd);
	a->job.template_made = !r;
	if (r) {
		dir_remove_flat(tmp);
		/* A stop signal, forwarded to a jailed maker: the run stops
		 * too (a sandbox deleted meanwhile must not boot) */
		if (r == 128 + SIGTERM || r == 128 + SIGINT || r == 128 + SIGHUP) {
			fprintf(stderr, "tinyvmm: stopped by signal %d while making template snapshot %s\n", r - 128,
				dir);
			return r;
		}
		fprintf(stderr, "tinyvmm: template snapshot %s could not be made; booting cold\n", dir);
		return 0;
	}
use:
	/* in the key: the restore takes them from the snapshot */
	a->c.net.mtu = 0;
	a->c.net.no_offload = 0;
	snprintf(a->template_dir, sizeof(a->template_dir), "%s", dir);
	a->snapshot = a->template_dir;
	return 0;
}
