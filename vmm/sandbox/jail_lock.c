/* The lockdown, once the VM is built and before it runs (Firecracker's
 * jailer does the same before it execs the VMM; here the VMM is already
 * running, so it is done to ourselves, single-threaded): rlimits, no
 * privileges left, and Landlock over what the jail still needs to open. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/landlock.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "vmm/core/err.h"
#include "vmm/sandbox/jail_impl.h"

int jail_set_rlimits(const struct jail_limits *l, struct tvm_err *e)
{
	const struct {
		int res;
		uint64_t v;
		const char *name;
	} set[] = { { RLIMIT_NOFILE, l->nofile, "NOFILE" },
		    { RLIMIT_FSIZE, l->fsize, "FSIZE" },
		    { RLIMIT_NPROC, l->nproc, "NPROC" },
		    { RLIMIT_CORE, l->core, "CORE" } };

	for (unsigned i = 0; i < sizeof(set) / sizeof(set[0]); i++) {
		struct rlimit rl = { .rlim_cur = set[i].v, .rlim_max = set[i].v };

		if (setrlimit(set[i].res, &rl) < 0)
			return tvm_errf(e, errno, "jail: rlimits: %s %llu: %s", set[i].name,
					(unsigned long long)set[i].v, strerror(errno));
	}
	return 0;
}

static int caps(int set, struct __user_cap_data_struct d[2])
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };

	return (int)syscall(set ? SYS_capset : SYS_capget, &h, d);
}

int jail_drop_privileges(uint32_t uid, uint32_t gid, struct tvm_err *e)
{
	struct __user_cap_data_struct d[2] = { { 0 } };

	if (!uid || !gid)
		return tvm_errf(e, EINVAL, "jail: uid/gid: %u/%u would keep root's", uid, gid);
	/* The bounding set caps what any later exec could gain; emptied while
	 * we still have CAP_SETPCAP. EINVAL: past the kernel's last cap. */
	for (int cap = 0; cap < 64; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			return tvm_errf(e, errno, "jail: capabilities: bounding set: %s", strerror(errno));
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return tvm_errf(e, errno, "jail: capabilities: ambient set: %s", strerror(errno));
	if (setgroups(0, NULL) < 0)
		return tvm_errf(e, errno, "jail: uid/gid: setgroups: %s", strerror(errno));
	if (setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
		return tvm_errf(e, errno, "jail: uid/gid: %u/%u: %s", uid, gid, strerror(errno));
	/* Leaving uid 0 cleared permitted and effective; inheritable too. */
	if (caps(1, d) < 0)
		return tvm_errf(e, errno, "jail: capabilities: capset: %s", strerror(errno));
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return tvm_errf(e, errno, "jail: no_new_privs: %s", strerror(errno));
	/* No core dump, no ptrace by another process of the jail uid. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return tvm_errf(e, errno, "jail: dumpable: %s", strerror(errno));
	if (caps(0, d) < 0 || d[0].effective || d[0].permitted || d[1].effective || d[1].permitted || getuid() != uid ||
	    geteuid() != uid)
		return tvm_errf(e, EPERM, "jail: capabilities: still privileged after the drop");
	return 0;
}

int jail_keep_caps(uint64_t keep, struct tvm_err *e)
{
	struct __user_cap_data_struct d[2] = { { 0 } };

	for (int cap = 0; cap < 64; cap++)
		if (!(keep >> cap & 1) && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			return tvm_errf(e, errno, "capabilities: bounding set: %s", strerror(errno));
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return tvm_errf(e, errno, "capabilities: ambient set: %s", strerror(errno));
	if (caps(0, d) < 0)
		return tvm_errf(e, errno, "capabilities: capget: %s", strerror(errno));
	for (int i = 0; i < 2; i++) {
		d[i].permitted &= (uint32_t)(keep >> (32 * i));
		d[i].effective &= (uint32_t)(keep >> (32 * i));
		d[i].inheritable = 0;
	}
	if (caps(1, d) < 0)
		return tvm_errf(e, errno, "capabilities: capset: %s", strerror(errno));
	return 0;
}

/* Landlock rights newer than these UAPI headers may be (ABI 3: truncate,
 * 4: TCP, 5: device ioctls, 6: scopes). */
#define LL_FS_REFER (1ULL << 13)
#define LL_FS_TRUNCATE (1ULL << 14)
#define LL_FS_IOCTL_DEV (1ULL << 15)
#define LL_NET_BIND_TCP (1ULL << 0)
#define LL_NET_CONNECT_TCP (1ULL << 1)
#define LL_SCOPE_ABSTRACT_UNIX (1ULL << 0)
#define LL_SCOPE_SIGNAL (1ULL << 1)

struct ll_ruleset_attr {
	uint64_t handled_access_fs, handled_access_net, scoped;
};

int jail_landlock_abi(void)
{
	long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);

	return v < 0 ? 0 : (int)v;
}

/* What a rule grants beneath a directory or on a file. */
static uint64_t rule_rights(unsigned access, int dir, uint64_t handled)
{
	uint64_t r = 0;

	if (access & (JAIL_LL_READ | JAIL_LL_WRITE))
		r |= LANDLOCK_ACCESS_FS_READ_FILE | (dir ? LANDLOCK_ACCESS_FS_READ_DIR : 0);
	if (access & (JAIL_LL_WRITE | JAIL_LL_TREE))
		r |= LANDLOCK_ACCESS_FS_WRITE_FILE | LL_FS_TRUNCATE |
		     (dir ? LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_REMOVE_FILE
			  : 0);
	if ((access & JAIL_LL_TREE) && dir)
		r |= LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_MAKE_DIR |
		     LANDLOCK_ACCESS_FS_REMOVE_DIR | LL_FS_REFER;
	if ((access & JAIL_LL_REMOVE) && dir)
		r |= LANDLOCK_ACCESS_FS_REMOVE_FILE;
	return r & handled;
}

/* The ruleset as a descriptor (-1: no Landlock here), built while the
 * rules' paths can still be opened; returns it or -errno. */
static int landlock_ruleset(const struct jail_ll_rule *rules, unsigned n, unsigned scopes, struct tvm_err *e)
{
	struct ll_ruleset_attr a = { 0 };
	size_t size = sizeof(a.handled_access_fs);
	int abi = jail_landlock_abi(), fd, r = 0;

	if (!abi)
		return -1;
	/* Every right this kernel knows is handled: what no rule grants is
	 * denied (exec, mkdir, symlinks, device nodes, ...). */
	a.handled_access_fs = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1;
	if (abi >= 2)
		a.handled_access_fs |= LL_FS_REFER;
	if (abi >= 3)
		a.handled_access_fs |= LL_FS_TRUNCATE;
	if (abi >= 5)
		a.handled_access_fs |= LL_FS_IOCTL_DEV; /* checked at open: /dev/kvm, opened before, keeps its ioctls */
	if (abi >= 4) {
		a.handled_access_net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP; /* no rule: no TCP at all */
		size = offsetof(struct ll_ruleset_attr, scoped);
	}
	if (abi >= 6) {
		a.scoped = (scopes & JAIL_LL_SCOPE_ABSTRACT_UNIX ? LL_SCOPE_ABSTRACT_UNIX : 0) |
			   (scopes & JAIL_LL_SCOPE_SIGNAL ? LL_SCOPE_SIGNAL : 0);
		size = sizeof(a);
	}
	fd = (int)syscall(SYS_landlock_create_ruleset, &a, size, 0);
	if (fd < 0)
		return tvm_errf(e, errno, "jail: landlock: ruleset (ABI %d): %s", abi, strerror(errno));
	for (unsigned i = 0; i < n && !r; i++) {
		struct landlock_path_beneath_attr pb = { 0 };
		struct stat st;

		pb.parent_fd = open(rules[i].path, O_PATH | O_CLOEXEC);
		if (pb.parent_fd < 0 || fstat(pb.parent_fd, &st) < 0) {
			r = tvm_errf(e, errno, "jail: landlock: %s: %s", rules[i].path, strerror(errno));
			break;
		}
		pb.allowed_access = rule_rights(rules[i].access, S_ISDIR(st.st_mode), a.handled_access_fs);
		if (syscall(SYS_landlock_add_rule, fd, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
			r = tvm_errf(e, errno, "jail: landlock: rule for %s: %s", rules[i].path, strerror(errno));
		close(pb.parent_fd);
	}
	if (r)
		close(fd);
	return r ? r : fd;
}

/* Restrict this thread (and its future ones) to ruleset fd, closed. */
static int landlock_restrict(int fd, struct tvm_err *e)
{
	int r = 0;

	if (fd < 0)
		return 0;
	if (syscall(SYS_landlock_restrict_self, fd, 0) < 0)
		r = tvm_errf(e, errno, "jail: landlock: restrict: %s", strerror(errno));
	close(fd);
	return r;
}

int jail_landlock_scoped(const struct jail_ll_rule *rules, unsigned n, unsigned scopes, struct tvm_err *e)
{
	int fd = landlock_ruleset(rules, n, scopes, e);

	return fd < -1 ? fd : landlock_restrict(fd, e);
}

int jail_landlock(const struct jail_ll_rule *rules, unsigned n, struct tvm_err *e)
{
	/* signals only within the jail */
	return jail_landlock_scoped(rules, n, JAIL_LL_SCOPE_ABSTRACT_UNIX | JAIL_LL_SCOPE_SIGNAL, e);
}

int jail_lockdown(struct jail *j, struct tvm_err *e)
{
	struct jail_limits l = { .nofile = JAIL_NOFILE, .fsize = j ? j->fsize : 0, .nproc = JAIL_NPROC, .core = 0 };
	struct jail_ll_rule rules[JAIL_MAX_STAGES + 3] = {
		{ JAIL_RUN_DIR, JAIL_LL_WRITE }, /* staged outputs, the socket's unlink */
		{ "/proc", JAIL_LL_READ },       /* /proc/self (RSS for --metrics) */
		{ "/dev/urandom", JAIL_LL_READ },
	};
	unsigned n = 3;
	int r, ll;

	if (!j)
		return 0;
	for (unsigned i = 0; i < j->nst; i++)
		if (j->st[i].snapshot) /* written after the guest ran */
			rules[n++] = (struct jail_ll_rule){ j->m[j->st[i].mount].path, JAIL_LL_WRITE };
	ll = landlock_ruleset(rules, n, JAIL_LL_SCOPE_ABSTRACT_UNIX | JAIL_LL_SCOPE_SIGNAL,
			      e); /* as root: every path opens */
	if (ll < -1)
		return ll;
	r = jail_set_rlimits(&l, e);
	if (!r)
		r = jail_drop_privileges(j->o.uid, j->o.gid, e);
	/* Changing uid cleared the parent-death signal: set it again, then
	 * make sure the parent did not go in between. */
	if (!r && j->in_child && (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || jail_parent_gone(j->life_fd)))
		r = tvm_errf(e, ESRCH, "jail: the tinyvmm process outside the jail is gone");
	if (r) {
		if (ll >= 0)
			close(ll);
		return r;
	}
	return landlock_restrict(ll, e);
}
