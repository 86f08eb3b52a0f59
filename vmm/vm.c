/* The VM object: composes KVM, guest memory, boot, devices and vCPUs.
 * Data flow of a boot: config -> kvm_open -> guest memory -> irqchip/PIT ->
 * vCPUs (CPUID, MSRs, LAPIC) -> kernel/initrd/zero page/page tables/MP table
 * in guest memory -> devices on the buses -> vCPU threads run. */
#include "vmm/tinyvmm.h"
#include "vmm/core/err.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "boot/boot.h"
#include "devices/legacy/i8042.h"
#include "devices/legacy/uart_8250.h"
#include "devices/blk/virtio_blk.h"
#include "devices/vsock/virtio_vsock.h"
#include "vmm/kvm/bus.h"
#include "vmm/config_copy.h"
#include "vmm/kvm/cpuid.h"
#include "vmm/kvm/event_loop.h"
#include "vmm/core/guest_mem.h"
#include "vmm/kvm/host_quirks.h"
#include "vmm/kvm/kvm.h"
#include "vmm/core/metrics.h"
#include "vmm/kvm/vcpu.h"
#include "vmm/vdev.h"
#include "vmm/vm_impl.h"

#define DEFAULT_CMDLINE "console=ttyS0 reboot=k panic=-1"
#define MAX_CPUS BOOT_MAX_CPUS
#define MIN_MEM_MIB 16
#define MAX_MEM_MIB (1u << 20) /* 1 TiB */

const char *tvm_default_cmdline(void)
{
	return DEFAULT_CMDLINE;
}

static bool quirks_apply(enum tvm_quirks q)
{
	return q == TVM_QUIRKS_ON || (q == TVM_QUIRKS_AUTO && host_quirks_detect());
}

const char *tvm_quirk_cmdline(enum tvm_quirks q)
{
	return quirks_apply(q) ? host_quirks_cmdline() : "";
}

static void vm_log(void *ctx, const char *msg)
{
	struct tvm_vm *vm = ctx;

	if (vm->cfg.log_fd >= 0)
		dprintf(vm->cfg.log_fd, "tinyvmm: %s\n", msg);
}

/* First terminal event wins; every vCPU is then kicked out of KVM_RUN. */
void vm_end(void *ctx, int reason, const char *msg)
{
	struct tvm_vm *vm = ctx;

	pthread_mutex_lock(&vm->lock);
	if (vm->exit_reason == TVM_EXIT_NONE) {
		vm->exit_reason = (enum tvm_exit)reason;
		snprintf(vm->exit_msg, sizeof(vm->exit_msg), "%s", msg);
		metrics_mark(&vm->metrics, MARK_GUEST_END);
	}
	atomic_store(&vm->stopping, true);
	pthread_cond_broadcast(&vm->ended);
	pthread_mutex_unlock(&vm->lock);
	vcpu_pause_wake(&vm->pause);
	for (int i = 0; i < vm->nr_vcpus; i++)
		vcpu_kick(&vm->vcpus[i]);
	if (vm->input_stop_fd >= 0)
		eventfd_write(vm->input_stop_fd, 1);
	/* Host ends of vsock connections see EOF now, so a caller blocked on
	 * the agent (a job, a file transfer) returns instead of waiting on a
	 * guest that will never answer: --ttl and Ctrl-C hold in job mode. */
	if (vm->vsock)
		virtio_vsock_transport_reset(vm->vsock);
}

static void on_guest_reset(void *ctx)
{
	vm_end(ctx, TVM_EXIT_RESET, "guest reset");
}

static void on_first_serial_byte(void *ctx)
{
	struct tvm_vm *vm = ctx;

	metrics_mark(&vm->metrics, MARK_FIRST_SERIAL_BYTE);
}

static void irq_set(void *ctx, unsigned gsi, int level)
{
	struct tvm_vm *vm = ctx;

	kvm_irq_line(&vm->kvm, gsi, level);
}

/* Port 0x80 is the PC's POST/delay port (Linux writes it to pause); 0x81..0x8f
 * are the DMA page registers, which Linux reads once at boot. No DMA here. */
static void io_sink(void *opaque, uint64_t off, uint8_t *data, uint32_t len, bool is_write)
{
	(void)opaque;
	(void)off;
	if (!is_write)
		memset(data, 0xff, len);
}

static int check_config(const struct tvm_config *c, bool need_kernel, struct tvm_err *e)
{
	if (need_kernel && (!c->kernel_path || !*c->kernel_path))
		return tvm_errf(e, EINVAL, "no kernel given");
	if (c->cpus < 1 || c->cpus > MAX_CPUS)
		return tvm_errf(e, EINVAL, "cpus: %u is out of range 1..%d", c->cpus, MAX_CPUS);
	if (c->nr_drives > TVM_MAX_DRIVES)
		return tvm_errf(e, EINVAL, "drives: %u is more than %d", c->nr_drives, TVM_MAX_DRIVES);
	for (unsigned i = 0; i < c->nr_drives; i++)
		if (!c->drives[i].path || !*c->drives[i].path)
			return tvm_errf(e, EINVAL, "drive %u: no path given", i);
	if (c->mem_mib < MIN_MEM_MIB || c->mem_mib > MAX_MEM_MIB)
		return tvm_errf(e, EINVAL, "memory: %u MiB is out of range %u..%u MiB", c->mem_mib, MIN_MEM_MIB,
				MAX_MEM_MIB);
	return 0;
}

/* Append " word" to the guest command line. */
int vm_cmdline_add(struct tvm_vm *vm, const char *word, struct tvm_err *e)
{
	size_t used = strlen(vm->cmdline);
	int n;

	if (!*word)
		return 0;
	n = snprintf(vm->cmdline + used, sizeof(vm->cmdline) - used, "%s%s", used ? " " : "", word);
	if (n < 0 || (size_t)n >= sizeof(vm->cmdline) - used)
		return tvm_errf(e, E2BIG, "guest command line: longer than %zu bytes", sizeof(vm->cmdline) - 1);
	return 0;
}

/* Base line, quirk words, root device, then the user's additions last so
 * they win over ours. Device words are appended when devices attach. */
static int compose_cmdline(struct tvm_vm *vm, struct tvm_err *e)
{
	const struct tvm_config *c = &vm->cfg;
	int r = vm_cmdline_add(vm, c->cmdline ? c->cmdline : DEFAULT_CMDLINE, e);

	if (!r && vm->quirks)
		r = vm_cmdline_add(vm, host_quirks_cmdline(), e);
	if (!r && c->root_drive && c->nr_drives)
		r = vm_cmdline_add(vm, c->drives[0].read_only ? "root=/dev/vda rootfstype=ext4 ro"
							   : "root=/dev/vda rootfstype=ext4 rw", e);
	if (!r && c->cmdline_append)
		r = vm_cmdline_add(vm, c->cmdline_append, e);
	return r;
}

static void close_blk(void *dev)
{
	virtio_blk_close(dev);
}

int vm_watch(void *ctx, int fd, uint32_t events, vsock_fd_cb cb, void *arg)
{
	struct tvm_vm *vm = ctx;

	return ev_add(&vm->loop, fd, events, cb, arg, NULL);
}

void vm_unwatch(void *ctx, int fd)
{
	struct tvm_vm *vm = ctx;

	ev_del(&vm->loop, fd);
}

static void vsock_kick(void *ctx, unsigned queue)
{
	struct tvm_vm *vm = ctx;

	virtio_mmio_notify(&vm->vsock_dev->t, queue);
}

static void close_vsock(void *dev)
{
	virtio_vsock_close(dev);
}

static int add_vsock(struct tvm_vm *vm, struct tvm_err *e)
{
	struct vsock_opts o = {
		.guest_cid = vm->cfg.vsock_cid, .uds_path = vm->cfg.vsock_uds,
		.io = { .watch = vm_watch, .unwatch = vm_unwatch, .kick = vsock_kick, .ctx = vm },
	};
	int r;

	if (!vm->cfg.vsock_cid)
		return 0;
	r = virtio_vsock_open(&vm->vsock, &o, e);
	if (r)
		return r;
	vm->vsock_dev = &vm->vdevs[vm->nr_vdevs];
	r = vdev_attach(vm->vsock_dev, vm->nr_vdevs, "virtio-vsock", &virtio_vsock_ops, vm->vsock, close_vsock,
			&vm->kvm, &vm->mmio, &vm->loop, &vm->mem, vm->cmdline, sizeof(vm->cmdline), e);
	vm->nr_vdevs++;
	return r;
}

static void on_ttl(void *opaque, uint32_t events)
{
	struct tvm_vm *vm = opaque;
	uint64_t n;

	(void)events;
	if (read(vm->ttl_fd, &n, sizeof(n)) == (ssize_t)sizeof(n))
		vm_end(vm, TVM_EXIT_TTL, "VM lifetime expired");
}

/* The lifetime runs on the event loop, so it holds whatever the caller of
 * the library does. */
static int arm_ttl(struct tvm_vm *vm, struct tvm_err *e)
{
	struct itimerspec its = { .it_value = { .tv_sec = vm->cfg.ttl_ms / 1000,
						 .tv_nsec = (long)(vm->cfg.ttl_ms % 1000) * 1000000 } };

	if (!vm->cfg.ttl_ms)
		return 0;
	vm->ttl_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (vm->ttl_fd < 0)
		return tvm_errf(e, errno, "ttl: timerfd_create: %s", strerror(errno));
	if (timerfd_settime(vm->ttl_fd, 0, &its, NULL) < 0)
		return tvm_errf(e, errno, "ttl: timerfd_settime: %s", strerror(errno));
	return ev_add(&vm->loop, vm->ttl_fd, EPOLLIN, on_ttl, vm, e);
}

static int add_drives(struct tvm_vm *vm, struct tvm_err *e)
{
	for (unsigned i = 0; i < vm->cfg.nr_drives; i++) {
		const struct tvm_drive *d = &vm->cfg.drives[i];
		struct blk_opts o = {
			.path = d->path, .id = d->id, .read_only = d->read_only, .cow = d->cow,
			.overlay_path = d->overlay_path, .overlay_limit = d->overlay_limit,
		};
		struct virtio_blk *blk;
		char name[24];
		int r = virtio_blk_open(&blk, &o, e);

		if (r)
			return r;
		snprintf(name, sizeof(name), "virtio-blk%u", i);
		r = vdev_attach(&vm->vdevs[vm->nr_vdevs], vm->nr_vdevs, name, &virtio_blk_ops, blk, close_blk,
				&vm->kvm, &vm->mmio, &vm->loop, &vm->mem, vm->cmdline, sizeof(vm->cmdline), e);
		vm->nr_vdevs++; /* destroy cleans up a half-attached one too */
		if (r)
			return r;
	}
	return 0;
}

/* Map a whole file read-only; what names it in errors ("kernel"). With fd
 * non-NULL the file stays open there (the caller closes it). */
static int map_file(const char *what, const char *path, const uint8_t **data, size_t *len, int *fd_out,
		    struct tvm_err *e)
{
	struct stat st;
	void *p;
	/* O_NONBLOCK: a FIFO must fail the regular-file check below, not
	 * block the open forever (regular files ignore the flag). */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return tvm_errf(e, errno, "%s %s: %s", what, path, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
		int r = tvm_errf(e, EINVAL, "%s %s: not a non-empty regular file", what, path);
		close(fd);
		return r;
	}
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED) {
		int r = tvm_errf(e, errno, "%s %s: mmap: %s", what, path, strerror(errno));
		close(fd);
		return r;
	}
	if (fd_out)
		*fd_out = fd;
	else
		close(fd);
	*data = p;
	*len = (size_t)st.st_size;
	return 0;
}

/* Put an ELF kernel's checked segments in guest RAM. Whole pages whose
 * file offset and GPA are page aligned (all of a Linux vmlinux's) are
 * mapped copy-on-write from the file, so the guest reads them lazily from
 * the page cache and the VMM copies ~nothing before the first KVM_RUN;
 * partial pages are copied; bss is zeroed. */
static int place_segments(struct tvm_vm *vm, const struct boot_kernel *k, const uint8_t *img, int fd,
			  struct tvm_err *e)
{
	for (int i = 0; i < k->nsegs; i++) {
		const struct boot_segment *s = &k->segs[i];
		uint8_t *dst = gm_ptr(&vm->mem, s->gpa, s->memsz); /* boot_plan_kernel checked it */
		uint64_t whole = ((s->gpa | s->file_off) & 4095) ? 0 : s->filesz & ~4095ULL;
		int r = whole ? gm_map_file(&vm->mem, s->gpa, fd, s->file_off, whole) : 0;

		if (r)
			return tvm_errf(e, -r, "segment %d at 0x%llx: mmap: %s", i, (unsigned long long)s->gpa,
					strerror(-r));
		memcpy(dst + whole, img + s->file_off + whole, s->filesz - whole);
		memset(dst + s->filesz, 0, s->memsz - s->filesz);
	}
	return 0;
}

static int load_guest(struct tvm_vm *vm, struct tvm_err *e)
{
	struct boot_kernel k;
	const uint8_t *img;
	size_t len;
	uint64_t initrd_gpa = 0, initrd_len = 0;
	struct kvm_sregs sregs;
	struct kvm_regs regs;
	int r, fd;

	r = map_file("kernel", vm->cfg.kernel_path, &img, &len, &fd, e);
	if (r)
		return r;
	r = boot_plan_kernel(&vm->mem, img, len, &k, e);
	if (!r)
		r = place_segments(vm, &k, img, fd, e);
	munmap((void *)img, len);
	close(fd);
	if (r) {
		tvm_err_prefix(e, "kernel %s", vm->cfg.kernel_path);
		return r;
	}
	if (vm->cfg.initrd_path) {
		r = map_file("initrd", vm->cfg.initrd_path, &img, &len, &fd, e);
		if (r)
			return r;
		r = boot_place_initrd(&vm->mem, &k, len, &initrd_gpa, e);
		if (!r) {
			/* Like the kernel: whole pages mapped, the tail copied. */
			struct boot_segment s = { .gpa = initrd_gpa, .memsz = len, .file_off = 0, .filesz = len };
			struct boot_kernel one = { .nsegs = 1, .segs = { s } };
			r = place_segments(vm, &one, img, fd, e);
		}
		munmap((void *)img, len);
		close(fd);
		if (r) {
			tvm_err_prefix(e, "initrd %s", vm->cfg.initrd_path);
			return r;
		}
		initrd_len = len;
	}
	r = boot_write_zero_page(&vm->mem, &k, vm->cmdline, initrd_gpa, initrd_len, e);
	if (!r)
		r = boot_write_gdt_and_page_tables(&vm->mem, e);
	if (!r)
		r = boot_write_mptable(&vm->mem, (int)vm->cfg.cpus, e);
	if (r)
		return r;
	boot_vcpu_regs(&k, &regs);
	r = vcpu_get_sregs(&vm->vcpus[0], &sregs, e);
	if (r)
		return r;
	boot_vcpu_sregs(&sregs);
	r = vcpu_set_sregs(&vm->vcpus[0], &sregs, e);
	if (!r)
		r = vcpu_set_regs(&vm->vcpus[0], &regs, e);
	metrics_mark(&vm->metrics, MARK_KERNEL_LOADED);
	return r;
}

static int create_vcpus(struct tvm_vm *vm, struct tvm_err *e)
{
	struct kvm_cpuid2 *supported, *cpuid;
	size_t size;
	int r;

	r = kvm_supported_cpuid(&vm->kvm, &supported, e);
	if (r)
		return r;
	size = sizeof(*supported) + supported->nent * sizeof(supported->entries[0]);
	cpuid = malloc(size);
	vm->vcpus = calloc(vm->cfg.cpus, sizeof(*vm->vcpus));
	if (!cpuid || !vm->vcpus) {
		free(supported);
		free(cpuid);
		return tvm_errf(e, ENOMEM, "vcpus: out of memory");
	}
	for (unsigned i = 0; i < vm->cfg.cpus && !r; i++) {
		memcpy(cpuid, supported, size);
		cpuid_normalize(cpuid, i, vm->cfg.cpus);
		if (vm->quirks)
			host_quirks_cpuid(cpuid);
		r = vcpu_create(&vm->vcpus[i], &vm->kvm, (int)i, cpuid, &vm->host, e);
		vm->nr_vcpus = (int)i + 1; /* destroy must clean up a half-made one too */
	}
	free(supported);
	free(cpuid);
	return r;
}

static int add_devices(struct tvm_vm *vm, struct tvm_err *e)
{
	int r = bus_register(&vm->pio, UART_COM1_PORT, UART_NR_REGS, "serial COM1", uart_8250_io, &vm->uart, e);
	if (!r)
		r = bus_register(&vm->pio, I8042_DATA_PORT, 1, "i8042 data", i8042_data_io, &vm->kbd, e);
	if (!r)
		r = bus_register(&vm->pio, I8042_CMD_PORT, 1, "i8042 command", i8042_cmd_io, &vm->kbd, e);
	if (!r)
		r = bus_register(&vm->pio, 0x80, 0x10, "POST port and DMA page registers", io_sink, NULL, e);
	return r;
}

int vm_build(const struct tvm_config *c, const char *mem_path, bool need_kernel, struct tvm_vm **out,
	     struct tvm_err *e)
{
	struct tvm_vm *vm;
	int r;

	*out = NULL;
	r = check_config(c, need_kernel, e);
	if (r)
		return r;
	vm = calloc(1, sizeof(*vm));
	if (!vm)
		return tvm_errf(e, ENOMEM, "vm: out of memory");
	if (config_copy(&vm->cfg, c, &vm->cfg_strings)) {
		free(vm);
		return tvm_errf(e, ENOMEM, "vm: out of memory");
	}
	c = &vm->cfg; /* the VM's own copy from here on */
	vm->kvm.sys_fd = vm->kvm.vm_fd = -1;
	vm->input_stop_fd = -1;
	vm->loop.epfd = vm->loop.stop_fd = -1;
	vm->ttl_fd = -1;
	pthread_mutex_init(&vm->lock, NULL);
	pthread_cond_init(&vm->ended, NULL);
	vcpu_pause_init(&vm->pause);
	uart_8250_init(&vm->uart, c->serial_out_fd, (struct irq_line){ .set = irq_set, .ctx = vm, .gsi = UART_COM1_IRQ });
	vm->uart.on_first_byte = on_first_serial_byte;
	vm->uart.cb_ctx = vm;
	vm->kbd = (struct i8042){ .on_reset = on_guest_reset, .ctx = vm };
	metrics_init(&vm->metrics, c->t0_ns);
	vm->host = (struct vcpu_host){
		.pio = &vm->pio, .mmio = &vm->mmio, .mem = &vm->mem, .metrics = &vm->metrics,
		.stopping = &vm->stopping, .pause = &vm->pause, .on_end = vm_end, .log = vm_log, .ctx = vm,
	};
	vm->quirks = quirks_apply(c->quirks);

	r = compose_cmdline(vm, e);
	if (!r)
		r = ev_init(&vm->loop, e);
	if (!r)
		r = kvm_open(&vm->kvm, e);
	if (!r)
		r = mem_path ? gm_init_file(&vm->mem, mem_path, (uint64_t)c->mem_mib << 20, e)
			     : gm_init_anon(&vm->mem, (uint64_t)c->mem_mib << 20, e);
	for (int i = 0; !r && i < vm->mem.nr; i++)
		r = kvm_set_memory(&vm->kvm, (uint32_t)i, vm->mem.r[i].gpa, vm->mem.r[i].size, vm->mem.r[i].host, e);
	if (!r)
		r = kvm_create_irqchip(&vm->kvm, e);
	if (!r)
		r = kvm_create_pit(&vm->kvm, e);
	if (!r)
		r = create_vcpus(vm, e);
	if (!r)
		r = add_devices(vm, e);
	if (!r)
		r = add_drives(vm, e);
	if (!r)
		r = add_vsock(vm, e);
	if (!r)
		r = vm_add_net(vm, e);
	if (r) {
		tvm_vm_destroy(vm);
		return r;
	}
	metrics_mark(&vm->metrics, MARK_VM_CREATED);
	*out = vm;
	return 0;
}

int tvm_vm_create(const struct tvm_config *c, struct tvm_vm **out, struct tvm_err *e)
{
	struct tvm_vm *vm;
	int r = vm_build(c, NULL, true, &vm, e);

	*out = NULL;
	if (r)
		return r;
	r = load_guest(vm, e);
	if (r) {
		tvm_vm_destroy(vm);
		return r;
	}
	*out = vm;
	return 0;
}


/* Host input for COM1, paced by the receive FIFO's room. */
static void *input_thread(void *arg)
{
	struct tvm_vm *vm = arg;
	struct pollfd p[2] = { { .fd = vm->cfg.serial_in_fd, .events = POLLIN }, { .fd = vm->input_stop_fd, .events = POLLIN } };
	uint8_t buf[UART_RX_FIFO];

	while (!atomic_load(&vm->stopping)) {
		size_t room = uart_8250_rx_room(&vm->uart);
		ssize_t n;

		p[0].events = room ? POLLIN : 0;
		if (poll(p, 2, room ? -1 : 10) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (!(p[0].revents & (POLLIN | POLLHUP)))
			continue;
		n = read(vm->cfg.serial_in_fd, buf, room);
		if (n <= 0)
			break;
		uart_8250_push_rx(&vm->uart, buf, (size_t)n);
	}
	return NULL;
}

int tvm_vm_start(struct tvm_vm *vm, struct tvm_err *e)
{
	int r;

	if (vm->started)
		return tvm_errf(e, EALREADY, "vm: already started");
	vm->started = true;
	/* Said once the VM is sure to run, so a refused config or kernel is
	 * the user's one error line, not the last of several. */
	if (vm->quirks)
		vm_log(vm, "kvm_pvm host: applying its quirks (CPUID CX16 hidden, guest command line words added)");
	vm_net_announce(vm);
	r = arm_ttl(vm, e);
	if (!r)
		r = ev_start(&vm->loop, e);
	if (r)
		return r;
	if (vm->cfg.serial_in_fd >= 0) {
		vm->input_stop_fd = eventfd(0, EFD_CLOEXEC);
		if (vm->input_stop_fd < 0)
			return tvm_errf(e, errno, "serial input: eventfd: %s", strerror(errno));
		r = pthread_create(&vm->input_thread, NULL, input_thread, vm);
		if (r)
			return tvm_errf(e, r, "serial input: pthread_create: %s", strerror(r));
		vm->input_started = true;
	}
	for (int i = 0; i < vm->nr_vcpus; i++) {
		r = vcpu_start(&vm->vcpus[i], e);
		if (r) {
			vm_end(vm, TVM_EXIT_VMM_ERROR, e->msg);
			return r;
		}
	}
	if (vm->restored)
		vm_restored_started(vm);
	return 0;
}

static void join_threads(struct tvm_vm *vm)
{
	for (int i = 0; i < vm->nr_vcpus; i++)
		vcpu_destroy(&vm->vcpus[i]);
	vm->nr_vcpus = 0;
	if (vm->input_started) {
		eventfd_write(vm->input_stop_fd, 1);
		pthread_join(vm->input_thread, NULL);
		vm->input_started = false;
	}
	/* After the vCPUs: no more notifications can arrive. */
	ev_stop(&vm->loop);
}

int tvm_vm_wait(struct tvm_vm *vm, struct tvm_err *e)
{
	enum tvm_exit reason;

	pthread_mutex_lock(&vm->lock);
	while (vm->exit_reason == TVM_EXIT_NONE)
		pthread_cond_wait(&vm->ended, &vm->lock);
	reason = vm->exit_reason;
	pthread_mutex_unlock(&vm->lock);
	join_threads(vm);
	if (reason == TVM_EXIT_RESET || reason == TVM_EXIT_STOPPED)
		return 0;
	if (reason == TVM_EXIT_TTL)
		return tvm_errf(e, ETIME, "%s", vm->exit_msg);
	return tvm_errf(e, EIO, "%s", vm->exit_msg);
}

int tvm_vm_run(struct tvm_vm *vm, struct tvm_err *e)
{
	int r = tvm_vm_start(vm, e);

	if (r)
		return r;
	return tvm_vm_wait(vm, e);
}

void tvm_vm_stop(struct tvm_vm *vm)
{
	vm_end(vm, TVM_EXIT_STOPPED, "stopped by the host");
}

#define AGENT_TRY_MS 5000 /* longest wait for READY on one connection attempt */

int tvm_vm_agent_connect(struct tvm_vm *vm, int timeout_ms, struct tvm_agent **out, struct tvm_err *e)
{
	uint64_t deadline = metrics_now_ns() + (uint64_t)timeout_ms * 1000000u;
	int r, fd;

	if (!vm->vsock)
		return tvm_errf(e, ENODEV, "agent: the VM has no vsock device");
	/* Until the agent listens, the guest refuses (EOF on our end): try
	 * again. Each try costs the guest a little, so not too often. */
	for (;;) {
		uint64_t now = metrics_now_ns();
		int left = now >= deadline ? 0 : (int)((deadline - now) / 1000000);

		if (atomic_load(&vm->stopping))
			return tvm_errf(e, ECONNREFUSED, "agent: the VM ended (%s)", vm->exit_msg);
		r = virtio_vsock_connect(vm->vsock, TVM_AGENT_PORT, &fd, e);
		if (r)
			return r;
		/* Bounded per try, so a stop request is seen within seconds
		 * even while the guest is too busy to answer. */
		r = tvm_agent_open(fd, left < AGENT_TRY_MS ? left : AGENT_TRY_MS, out, e);
		if (!r && atomic_exchange(&vm->needs_seed, false)) {
			/* A restored guest shares its RNG state and a stale
			 * clock with every other restore of the snapshot. */
			r = tvm_agent_seed(*out, e);
			if (r) {
				tvm_agent_close(*out);
				*out = NULL;
			}
			return r;
		}
		if (r != -ECONNRESET && r != -ECONNREFUSED && !(r == -ETIMEDOUT && left > AGENT_TRY_MS))
			return r;
		if (metrics_now_ns() + 200000000u >= deadline)
			return tvm_errf(e, ETIMEDOUT, "agent: not ready within %d ms", timeout_ms);
		usleep(200000);
	}
}

enum tvm_exit tvm_vm_exit_reason(const struct tvm_vm *vm)
{
	return vm->exit_reason;
}

long tvm_vm_vmm_rss_kib(const struct tvm_vm *vm)
{
	return metrics_rss_kib_excluding(vm->mem.base, vm->mem.size);
}

int tvm_vm_write_metrics(const struct tvm_vm *vm, const char *path, struct tvm_err *e)
{
	FILE *f = fopen(path, "we");

	if (!f)
		return tvm_errf(e, errno, "metrics %s: %s", path, strerror(errno));
	fprintf(f, "{");
	for (int i = 0; i < MARK_COUNT; i++)
		fprintf(f, "\"%s\":%llu,", metrics_mark_name(i), (unsigned long long)atomic_load(&vm->metrics.at_us[i]));
	fprintf(f, "\"vmm_rss_kib\":%ld,\"guest_mem_mib\":%u,\"exits\":[", metrics_rss_kib_excluding(vm->mem.base, vm->mem.size),
		vm->cfg.mem_mib);
	for (unsigned i = 0; i < vm->cfg.cpus && vm->vcpus; i++) {
		fprintf(f, "%s{\"vcpu\":%u", i ? "," : "", i);
		for (int k = 0; k < VEXIT_COUNT; k++)
			fprintf(f, ",\"%s\":%llu", vcpu_exit_kind_name(k),
				(unsigned long long)atomic_load(&vm->vcpus[i].exits[k]));
		fprintf(f, "}");
	}
	fprintf(f, "],\"exit_reason\":%d", (int)vm->exit_reason);
	vm_net_write_metrics(vm, f);
	fprintf(f, "}\n");
	if (fclose(f) != 0)
		return tvm_errf(e, errno, "metrics %s: %s", path, strerror(errno));
	return 0;
}

void tvm_vm_destroy(struct tvm_vm *vm)
{
	if (!vm)
		return;
	if (vm->started)
		vm_end(vm, TVM_EXIT_STOPPED, "destroyed");
	join_threads(vm);
	for (unsigned i = 0; i < vm->nr_vdevs; i++)
		vdev_destroy(&vm->vdevs[i], &vm->loop);
	ev_destroy(&vm->loop);
	if (vm->ttl_fd >= 0)
		close(vm->ttl_fd);
	free(vm->vcpus);
	if (vm->input_stop_fd >= 0)
		close(vm->input_stop_fd);
	uart_8250_destroy(&vm->uart);
	kvm_close(&vm->kvm);
	gm_destroy(&vm->mem);
	pthread_mutex_destroy(&vm->lock);
	pthread_cond_destroy(&vm->ended);
	vcpu_pause_destroy(&vm->pause);
	free(vm->cfg_strings);
	free(vm);
}
