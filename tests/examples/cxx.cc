// The public headers compile as C++ (extern "C" guard) and the library links
// into a C++ program: build/examples/cxx, run by make unit. It needs no KVM.
#include <cstdio>
#include <cstring>

#include "vmm/tinyvmm.h"

int main()
{
	struct tvm_config c;

	tvm_config_init(&c);
	if (c.mem_mib == 0 || c.cpus != 1 || c.serial_out_fd != -1) {
		std::fprintf(stderr, "cxx: tvm_config_init left mem %u MiB, %u cpus, serial fd %d\n", c.mem_mib, c.cpus,
			     c.serial_out_fd);
		return 1;
	}
	if (std::strlen(tvm_default_cmdline()) == 0 || std::strcmp(tvm_net_drop_name(TVM_NET_DROP_COUNT), "?") != 0) {
		std::fprintf(stderr, "cxx: unexpected default command line or drop name\n");
		return 1;
	}
	std::printf("cxx: tinyvmm.h compiles as C++, default cmdline \"%s\"\n", tvm_default_cmdline());
	return 0;
}
