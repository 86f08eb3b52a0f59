/* The daemon's own walls, put on its main thread before it reads a
 * client's byte and before it starts a thread (every thread inherits
 * them): as root a mount view of its own (jail_view), Landlock over the
 * file system, then the seccomp role SC_DAEMON
 * (vmm/sandbox/seccomp_roles.c). What needs more goes through the
 * privileged helper (serve_priv.c), forked before. */
#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "vmm/sandbox/jail.h"
#include "vmm/sandbox/seccomp.h"
#include "vmm/serve/serve.h"

int srv_walls(const struct srv_cfg *c, struct tvm_err *e)
{
	int r;

	if (c->seccomp == TVM_SECCOMP_OFF)
		return 0;
	/* As root, first a view of its own: only its state dir and /proc
	 * exist for it, so no other path (a container runtime's socket, a
	 * host file) can even be named; /dev/kvm and the guest are the
	 * helper's to look at (PRIV_HOST). Not as another user: a user
	 * namespace would hide the clients' uids (SO_PEERCRED). */
	if (geteuid() == 0) {
		char jail[sizeof(c->state_dir) + 8];

		/* Its VMMs' jails (--jail-dir <state>/jail) read-only: their
		 * owner and extra files are trusted by root (a VMM's jail
		 * parent and the next daemon clean stale jails up, removing
		 * the stage paths listed there): none may be the daemon's. */
		snprintf(jail, sizeof(jail), "%s/jail", c->state_dir);
		struct jail_view_dir view[] = { { c->state_dir, JAIL_M_RW }, { jail, 0 }, { "/proc", 0 } };

		if ((r = jail_view(view, 3, e)))
			return r;
	}
	/* It reads and writes only beneath its state dir (sandboxes, their
	 * snapshots and logs, templates, the CPU ledger) and reads /proc (a
	 * VMM's start time, command line and CPU time): its config and
	 * socket group were read before, the VMMs read the guest and the
	 * template cache, and its socket is removed by the helper at its
	 * stop (PRIV_SOCKET_GONE). Taken over, it reads no host file (keys,
	 * /etc/shadow), runs nothing, has no TCP and no abstract socket,
	 * cannot ptrace or open /proc/PID/mem of a process outside (the
	 * helper, init), and signals none (a VMM's signal is the helper's:
	 * PRIV_KILL; seccomp refuses kill too). */
	struct jail_ll_rule rules[] = {
		{ "/proc", JAIL_LL_READ },
		{ c->state_dir, JAIL_LL_TREE },
	};
	/* Landlock's restrict_self wants no_new_privs without CAP_SYS_ADMIN
	 * (a daemon not run as root): the daemon runs nothing, and its
	 * helper, forked before, keeps its own. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return tvm_errf(e, errno, "no_new_privs: %s", strerror(errno));
	if ((r = jail_landlock_scoped(rules, sizeof(rules) / sizeof(rules[0]),
				      JAIL_LL_SCOPE_ABSTRACT_UNIX | JAIL_LL_SCOPE_SIGNAL, e)))
		return r;
	/* As root, then only what root may do that it needs: files and
	 * sockets of other users' in its state dir (a jailed VMM's). Not
	 * CAP_DAC_READ_SEARCH (open_by_handle_at: out of any bind mount),
	 * CAP_SYS_PTRACE nor the rest: with fewer capabilities than a root
	 * process it cannot open that process's /proc/PID/root (its view's
	 * way out where Landlock is missing), nor mount or signal. After
	 * Landlock, whose restrict_self needs CAP_SYS_ADMIN or
	 * no_new_privs (seccomp sets that next). */
	if (geteuid() == 0) {
		if ((r = jail_keep_caps(1ull << CAP_CHOWN | 1ull << CAP_DAC_OVERRIDE | 1ull << CAP_FOWNER, e)))
			return r;
		if (!jail_landlock_abi())
			fprintf(stderr,
				"tinyvmm serve: this kernel has no Landlock: the daemon's walls are its own view, "
				"fewer capabilities and seccomp only\n");
	}
	if ((r = sc_supported(c->seccomp, e)))
		return r;
	return sc_confine(SC_DAEMON, 0, c->seccomp, -1, e);
}
