/* The way to a sandbox's VMM: its hybrid vsock socket, pinned. A jailed
 * VMM's socket is reached through <sandbox>/vsock.sock, a symlink its
 * jail's parent (root) made to <state>/jail/<id>/root/run/vsock, in the
 * jail's /run. That last entry is the VMM's to change, and the VMM is the
 * process that faces the guest: taken over, it could put a symlink there
 * to another sandbox's socket, which the daemon would follow in its own
 * view (its exec and file requests reaching another owner's guest). So the
 * daemon opens the socket itself (O_PATH, not following a last symlink)
 * and connects through /proc/self/fd/N: a socket there, or nothing. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vmm/core/err.h"
#include "vmm/sandbox/jail.h"
#include "vmm/serve/serve.h"

/* Whether target is <jails><id>/root/run/vsock: a jail's own socket (id
 * one name, not . or ..). */
static bool in_its_jail(const char *target, const char *jails)
{
	const char *tail = "/root" JAIL_VSOCK_PATH;
	size_t jl = strlen(jails), tl = strlen(target), vl = strlen(tail), idl;
	const char *id = target + jl;

	if (tl <= jl + vl || strncmp(target, jails, jl) || strcmp(target + tl - vl, tail))
		return false;
	idl = tl - vl - jl;
	return !memchr(id, '/', idl) && !(idl == 1 && id[0] == '.') && !(idl == 2 && id[0] == '.' && id[1] == '.');
}

int vmm_socket_open(const char *sb_dir, const char *uds, char *path, size_t cap, struct tvm_err *e)
{
	char target[PATH_MAX], jails[PATH_MAX];
	const char *at = uds, *sbs = NULL;
	struct stat st;
	ssize_t n;
	int fd;

	/* the last one: the state dir's own path may hold the word too */
	for (const char *p = sb_dir; (p = strstr(p, "/sandboxes/")); p++)
		sbs = p;
	if (lstat(uds, &st) < 0)
		return tvm_errf(e, errno, "vsock socket %s: %s", uds, strerror(errno));
	if (S_ISLNK(st.st_mode)) {
		/* the jail parent's link: into its jail's /run, nowhere else */
		n = readlink(uds, target, sizeof(target) - 1);
		if (n <= 0)
			return tvm_errf(e, n < 0 ? errno : EINVAL, "vsock socket %s: unreadable link", uds);
		target[n] = 0;
		/* its jails are <state>/jail/, beside <state>/sandboxes/ */
		snprintf(jails, sizeof(jails), "%.*s/jail/", sbs ? (int)(sbs - sb_dir) : 0, sb_dir);
		if (!sbs || !in_its_jail(target, jails))
			return tvm_errf(e, EPERM, "vsock socket %s: a link to %s, not into a jail's /run: refused", uds,
					target);
		at = target;
	}
	fd = open(at, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return tvm_errf(e, errno, "vsock socket %s: %s", at, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode)) {
		close(fd);
		return tvm_errf(e, EPERM, "vsock socket %s: not a socket (its VMM put something else there): refused",
				at);
	}
	snprintf(path, cap, "/proc/self/fd/%d", fd);
	return fd;
}

/* tvm_agent_connect to sb's VMM through its pinned socket; the socket
 * may not be there yet (a VMM starting): looked for again until
 * timeout_ms. */
static int vmm_connect(struct sandbox *sb, int timeout_ms, unsigned flags, struct tvm_agent **a, struct tvm_err *e)
{
	uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000u;
	char path[64];
	int fd, r;

	*a = NULL;
	while ((fd = vmm_socket_open(sb->dir, sb->uds, path, sizeof(path), e)) == -ENOENT &&
	       now_ns() + 100000000u < deadline)
		usleep(100000);
	if (fd < 0)
		return fd;
	uint64_t now = now_ns();
	r = tvm_agent_connect(&(struct tvm_agent_addr){ .uds_path = path },
			      now >= deadline ? 1 : (int)((deadline - now) / 1000000u), flags, a, e);
	close(fd);
	return r;
}

int sb_agent(struct sandbox *sb, int timeout_ms, struct tvm_agent **a, struct tvm_err *e)
{
	return vmm_connect(sb, timeout_ms, 0, a, e);
}

int sb_keeper(struct sandbox *sb, int timeout_ms, struct tvm_agent **a, struct tvm_err *e)
{
	return vmm_connect(sb, timeout_ms, TVM_AGENT_SEED, a, e);
}
