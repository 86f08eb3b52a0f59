/* Connecting to the guest agent, one path for every caller: a VM of this
 * process through its in-process vsock device, or a VM of any process
 * through its hybrid vsock Unix socket. Retried until the agent answers;
 * SEED after a boot (asked for) or a restore (always). */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <unistd.h>

#include "vmm/agent_client.h"
#include "vmm/core/err.h"
#include "vmm/core/clock.h"
#include "vmm/vm_impl.h"

#define AGENT_TRY_MS 5000  /* longest wait for an answer on one connection attempt */
#define RETRY_MS 200       /* between attempts: each one costs the guest a little */
#define UDS_APPEAR_MS 5000 /* a socket path still missing after this long is taken as wrong */

/* One attempt: connected and READY within try_ms, or -errno (no_vmm: the
 * socket itself refused or was missing). */
static int agent_try(const struct tvm_agent_addr *to, int try_ms, struct tvm_agent **out, bool *no_vmm,
		     struct tvm_err *e)
{
	int fd, r;

	*no_vmm = false;
	if (!to->vm)
		return agent_connect_uds(to->uds_path, TVM_AGENT_PORT, try_ms, out, no_vmm, e);
	r = virtio_vsock_connect(to->vm->vsock, TVM_AGENT_PORT, &fd, e);
	return r ? r : tvm_agent_open(fd, try_ms, out, e);
}

/* Whether an attempt's error r means "not yet" rather than "never";
 * waited_ms: since the first attempt. */
static bool not_yet(int r, bool no_vmm, uint64_t waited_ms)
{
	/* The VMM makes its socket and listens as the VM is built: one not
	 * there, or refusing, this long after is none (a stale socket). */
	if (no_vmm)
		return waited_ms < UDS_APPEAR_MS;
	switch (-r) {
	case ECONNREFUSED: /* the guest refuses the port until the agent listens */
	case ECONNRESET:
	case ETIMEDOUT: /* no answer to CONNECT until the guest's vsock driver is up */
	case EBUSY: /* the agent's connections are all taken: one may end */ return true;
	}
	return false;
}

int tvm_agent_connect(const struct tvm_agent_addr *to, int timeout_ms, unsigned flags, struct tvm_agent **out,
		      struct tvm_err *e)
{
	uint64_t start = clock_mono_ns(), deadline = start + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000u;
	struct tvm_vm *vm = to ? to->vm : NULL;
	bool seed, no_vmm;
	int r;

	*out = NULL;
	if (!to || !vm == !to->uds_path)
		return tvm_errf(e, EINVAL, "agent: connect to a VM or to a vsock socket path (one of them)");
	if (vm && !vm->vsock)
		return tvm_errf(e, ENODEV, "agent: the VM has no vsock device");
	for (;;) {
		uint64_t now = clock_mono_ns();
		int left = now >= deadline ? 0 : (int)((deadline - now) / 1000000);

		if (vm && atomic_load(&vm->stopping))
			return tvm_errf(e, ECONNREFUSED, "agent: the VM ended (%s)", vm->exit_msg);
		/* Bounded per try, so a stop request is seen within seconds
		 * even while the guest is too busy to answer, and a CONNECT
		 * lost in a device reset is sent again. */
		r = agent_try(to, left < AGENT_TRY_MS ? left : AGENT_TRY_MS, out, &no_vmm, e);
		/* A restored guest shares its RNG state and a stale clock with
		 * every other restore of the snapshot: its first connection
		 * seeds it, whatever the caller asked. Seeding is part of the
		 * try: the guest's vsock transport reset after a restore can
		 * close a connection it had just accepted (ECONNRESET: again). */
		seed = vm ? atomic_load(&vm->needs_seed) : false;
		if (!r && (seed || (flags & TVM_AGENT_SEED)) && (r = tvm_agent_seed(*out, e))) {
			tvm_agent_close(*out);
			*out = NULL;
		}
		if (!r) {
			if (seed)
				atomic_store(&vm->needs_seed, false);
			break;
		}
		if (!not_yet(r, no_vmm, (now - start) / 1000000))
			return r;
		if (clock_mono_ns() + RETRY_MS * 1000000u >= deadline) {
			/* The last attempt's error says what was waited for. */
			tvm_err_prefix(e, "agent: not ready within %d ms", timeout_ms);
			if (e)
				e->code = ETIMEDOUT;
			return -ETIMEDOUT;
		}
		usleep(RETRY_MS * 1000);
	}
	return 0;
}

int tvm_vm_agent_connect(struct tvm_vm *vm, int timeout_ms, struct tvm_agent **out, struct tvm_err *e)
{
	return tvm_agent_connect(&(struct tvm_agent_addr){ .vm = vm }, timeout_ms, 0, out, e);
}
