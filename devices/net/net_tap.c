#include "devices/net/net_tap.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <linux/if_tun.h>
#include <linux/virtio_net.h>

/* Close fd and report what failed (errno as the ioctl left it). */
static int fail(int fd, struct tvm_err *e, const char *name, const char *what)
{
	int err = errno;
	const char *hint = err == EPERM ? " (needs CAP_NET_ADMIN, or a TAP created for our user)"
			   : err == EINVAL && !strcmp(what, "TUNSETIFF") ? " (an existing device that is not a TAP?)"
									 : "";

	close(fd);
	return tvm_errf(e, err, "net tap %s: %s: %s%s", name, what, strerror(err), hint);
}

/* The header size both ways and nothing offloaded until a driver asks. */
static int setup_hdr(int fd)
{
	int hdr = (int)sizeof(struct virtio_net_hdr_v1);

	if (ioctl(fd, TUNSETVNETHDRSZ, &hdr) < 0)
		return -1;
	return ioctl(fd, TUNSETOFFLOAD, 0UL);
}

int net_tap_adopt(int fd, char ifname[IFNAMSIZ], struct tvm_err *e)
{
	const short want = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
	struct ifreq ifr = { 0 };

	if (ioctl(fd, TUNGETIFF, &ifr) < 0)
		return 0;
	if ((ifr.ifr_flags & (IFF_TUN | IFF_TAP | IFF_NO_PI | IFF_VNET_HDR)) != want)
		return tvm_errf(e, EINVAL, "net tap %.*s: given fd is not set up IFF_TAP | IFF_NO_PI | IFF_VNET_HDR",
				IFNAMSIZ, ifr.ifr_name);
	if (setup_hdr(fd) < 0)
		return tvm_errf(e, errno, "net tap %.*s: %s", IFNAMSIZ, ifr.ifr_name, strerror(errno));
	memcpy(ifname, ifr.ifr_name, IFNAMSIZ);
	ifname[IFNAMSIZ - 1] = 0;
	return 1;
}

int net_tap_open(const char *name, char ifname[IFNAMSIZ], struct tvm_err *e)
{
	struct ifreq ifr = { .ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR };
	const char *shown = name ? name : "(new)";
	int fd;

	if (name && (!*name || strlen(name) >= IFNAMSIZ))
		return tvm_errf(e, EINVAL, "net tap %s: name must be 1..%d characters", name, IFNAMSIZ - 1);
	strcpy(ifr.ifr_name, name ? name : "tvm%d");
	fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return tvm_errf(e, errno, "net tap %s: /dev/net/tun: %s", shown, strerror(errno));
	if (ioctl(fd, TUNSETIFF, &ifr) < 0)
		return fail(fd, e, shown, "TUNSETIFF");
	/* Nothing offloaded until a driver takes offload features (the
	 * device sets the flags at DRIVER_OK): until then the host stack
	 * hands us complete, checksummed frames of at most the TAP's MTU. */
	if (setup_hdr(fd) < 0)
		return fail(fd, e, shown, "TUNSETVNETHDRSZ/TUNSETOFFLOAD");
	memcpy(ifname, ifr.ifr_name, IFNAMSIZ);
	ifname[IFNAMSIZ - 1] = 0;
	return fd;
}
