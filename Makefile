# tinyvmm build. `make` builds libtinyvmm.a and the tinyvmm binary;
# `make test` runs the layer, symbol and format checks, unit tests (ASan+UBSan) and the
# integration tests that boot the real guest (one runs a Slurm cluster on
# this machine; `make test-slurm` runs it alone); `make fuzz`, `make bench`,
# `make bench-report`,
# `make guest`, `make check-layers`, `make check-symbols`, `make format-check`
# as named.

CC       ?= gcc
CXX      ?= g++
CLANG    ?= clang
LD       ?= ld
OBJCOPY  ?= objcopy
CLANG_FORMAT ?= clang-format
BUILD    ?= build
WARN     := -Wall -Wextra -Werror
CFLAGS   ?= -O2 -g
ALL_CFLAGS := -std=gnu11 $(WARN) $(CFLAGS) -I. -D_GNU_SOURCE -MMD -MP
SAN      := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
PREFIX   ?= /usr/local
DESTDIR  ?=
VERSION  := $(shell sed -n 's/^\#define TVM_VERSION "\(.*\)"/\1/p' vmm/core/version.h)
SOMAJOR  := 0
SONAME   := libtinyvmm.so.$(SOMAJOR)
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lm -lrt -lpthread)

LIB_DIRS := vmm/core vmm/kvm boot devices/virtio devices/legacy devices/blk devices/vsock devices/net vmm/snapshot vmm/sandbox vmm
LIB_SRCS := $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c)) guest/protocol.c
CLI_SRCS := $(wildcard vmm/cli/*.c)
# tinyvmm serve: in the binary, not the library (tests include its parsers).
SERVE_SRCS := $(wildcard vmm/serve/*.c)
SERVE_OBJS := $(SERVE_SRCS:%.c=$(BUILD)/%.o)
LIB_SRCS := $(wildcard $(LIB_SRCS))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/%.o)
CLI_OBJS := $(CLI_SRCS:%.c=$(BUILD)/%.o)
SAN_OBJS := $(LIB_SRCS:%.c=$(BUILD)/san/%.o)
PIC_OBJS := $(LIB_SRCS:%.c=$(BUILD)/pic/%.o)

UNIT_SRCS := $(wildcard tests/test_*.c)
UNIT_BINS := $(UNIT_SRCS:tests/%.c=$(BUILD)/tests/%)
IT_SRCS   := $(wildcard tests/integration/test_*.c)
IT_BINS   := $(IT_SRCS:tests/integration/%.c=$(BUILD)/it/%)
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(FUZZ_SRCS:tests/fuzz/%.c=$(BUILD)/fuzz/%)
TOOL_SRCS := $(wildcard tools/*.c)
TOOL_BINS := $(TOOL_SRCS:tools/%.c=$(BUILD)/tools/%) $(BUILD)/tools/netbench
# Programs built the way a user of the library builds them (tests/examples).
EXAMPLE_BINS := $(BUILD)/examples/clash $(BUILD)/examples/cxx
FORMAT_SRCS = $(shell find vmm boot devices guest tests tools -name '*.[ch]' -o -name '*.cc')

.PHONY: all test unit integration fuzz bench bench-report guest clean check-layers check-symbols format-check install uninstall
all: tinyvmm $(BUILD)/libtinyvmm.a $(BUILD)/$(SONAME) $(TOOL_BINS) $(BUILD)/guest/tinyvmm-agent $(EXAMPLE_BINS)

# Library objects export nothing unless marked TVM_API (vmm/core/tvm_types.h).
# They are rebuilt when their flags change (the stamp file holds them).
LIB_CFLAGS := $(ALL_CFLAGS) -fvisibility=hidden
$(LIB_OBJS): ALL_CFLAGS := $(LIB_CFLAGS)
$(LIB_OBJS): $(BUILD)/lib-cflags
$(BUILD)/lib-cflags: FORCE
	@mkdir -p $(dir $@)
	@echo '$(LIB_CFLAGS)' | cmp -s - $@ || echo '$(LIB_CFLAGS)' > $@
.PHONY: FORCE

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/san/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(SAN) -c $< -o $@

$(BUILD)/pic/%.o: %.c $(BUILD)/lib-cflags
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) -fPIC -c $< -o $@

# The shared library: the same hidden-by-default objects, built PIC, with a
# versioned soname (the major number changes when the ABI does).
$(BUILD)/$(SONAME): $(PIC_OBJS)
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,-z,defs -o $@ $^ -lpthread

# The installed library: one relocatable object whose hidden symbols are made
# local, so a program linking it sees only the tvm_* API and may define its
# own ev_add, cow_open, ... (tests/examples/clash.c; make check-symbols).
$(BUILD)/libtinyvmm.o: $(LIB_OBJS)
	$(LD) -r -o $@.tmp $^
	$(OBJCOPY) --localize-hidden $@.tmp $@
	@rm -f $@.tmp

$(BUILD)/libtinyvmm.a: $(BUILD)/libtinyvmm.o
	@rm -f $@
	ar rcs $@ $^

# The same objects with every internal symbol still global, for the CLI,
# which uses internal helpers (tvm_errf, ...).
$(BUILD)/libtinyvmm-internal.a: $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libtinyvmm-san.a: $(SAN_OBJS)
	@rm -f $@
	ar rcs $@ $^

tinyvmm: $(CLI_OBJS) $(SERVE_OBJS) $(BUILD)/libtinyvmm-internal.a
	$(CC) $(ALL_CFLAGS) -o $@ $^ -lpthread

# For tests/integration/test_seccomp_run.c only, never installed: the
# release objects with the seccomp module built with TVM_SECCOMP_SELFTEST,
# which makes the event-loop thread call what its filter forbids (the
# release binary cannot).
$(BUILD)/seccomp-test/seccomp.o: vmm/sandbox/seccomp.c $(BUILD)/lib-cflags
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) -DTVM_SECCOMP_SELFTEST -c $< -o $@

$(BUILD)/tinyvmm-seccomp-test: $(CLI_OBJS) $(SERVE_OBJS) $(BUILD)/seccomp-test/seccomp.o $(BUILD)/libtinyvmm-internal.a
	$(CC) $(ALL_CFLAGS) -o $@ $^ -lpthread

# A program whose own ev_add, cow_open and config_copy would clash with the
# library's internals if they were exported; it boots the guest (make
# integration runs it).
$(BUILD)/examples/clash: tests/examples/clash.c $(BUILD)/libtinyvmm.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(BUILD)/libtinyvmm.a -lpthread

# The public headers compile as C++ and the library links into a C++ program.
$(BUILD)/examples/cxx: tests/examples/cxx.cc $(BUILD)/libtinyvmm.a
	@mkdir -p $(dir $@)
	$(CXX) -std=c++11 -Wall -Wextra -Werror -O2 -g -I. -MMD -MP -o $@ $< $(BUILD)/libtinyvmm.a -lpthread

$(BUILD)/tools/%: tools/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $<

# The host (server) end of tools/bench-net.sh; the guest end is the same
# file built static into the test initramfs.
$(BUILD)/tools/netbench: guest/netbench.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $<

$(BUILD)/tests/%: tests/%.c $(BUILD)/libtinyvmm-san.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(SAN) -o $@ $< $(BUILD)/libtinyvmm-san.a $(CHECK_LIBS) -lpthread

# It runs the binary on a snapshot it writes (--no-inplace-drives).
$(BUILD)/tests/test_cli_inplace: tinyvmm

$(BUILD)/it/%: tests/integration/%.c tests/integration/it_common.h $(BUILD)/libtinyvmm-san.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(SAN) -o $@ $< $(BUILD)/libtinyvmm-san.a $(CHECK_LIBS) -lpthread

# libFuzzer targets: clang with ASan+UBSan; each links the library sources directly.
$(BUILD)/fuzz/%: tests/fuzz/%.c $(LIB_SRCS)
	@mkdir -p $(dir $@)
	$(CLANG) -std=gnu11 -g -O1 -I. -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -o $@ $< $(LIB_SRCS) -lpthread

include guest/agent.mk

unit: $(UNIT_BINS) $(BUILD)/examples/cxx
	@set -e; for t in $(UNIT_BINS) $(BUILD)/examples/cxx; do echo "== $$t"; $$t; done; \
	echo "== tests/bench/run.sh"; bash tests/bench/run.sh

# The integration tests boot the guest built by tools/build-guest.sh and the
# base image built by tools/build-rootfs.sh with our agent as /sbin/init
# (both cached outside the clone). The jobs and snapshot suites run a second
# time with every VM a `tinyvmm run --jail` process (TINYVMM_IT_JAIL=1).
# On a machine without a usable /dev/kvm the suites that boot the guest are
# skipped with one line saying so (a failure with TINYVMM_REQUIRE_KVM=1);
# test_cli_errors, which boots none, still runs (what it finds only once KVM
# is open is skipped); the Python suites skip their VM cases themselves.
integration: tinyvmm $(BUILD)/tinyvmm-seccomp-test $(IT_BINS) $(AGENT_BIN) $(BUILD)/examples/clash
	@set -e; t0=$$(date +%s); sec() { echo "== [$$(( $$(date +%s) - t0 )) s] $$*"; }; \
	guest=$$(bash tools/build-guest.sh --print-dir); \
	rootfs=$$(bash tools/build-rootfs.sh --init $(AGENT_BIN) --print-path); \
	run() { rm -f $(BUILD)/it/asan.*; \
	  env ASAN_OPTIONS=quarantine_size_mb=4:log_path=$(BUILD)/it/asan "$$@" && return 0; st=$$?; \
	  for f in $(BUILD)/it/asan.*; do [ -f "$$f" ] || continue; \
	    echo "== $$f: the sanitizer's report (its head; the end of a log is what CI shows)"; head -n 30 "$$f"; done; \
	  return $$st; }; \
	if [ -c /dev/kvm ] && [ -r /dev/kvm ] && [ -w /dev/kvm ]; then \
	for t in $(IT_BINS); do sec "$$t"; run env TINYVMM_GUEST_DIR=$$guest TINYVMM_ROOTFS=$$rootfs $$t; done; \
	for t in test_jobs test_snapshot; do sec "$(BUILD)/it/$$t, every VM jailed"; \
	  run env TINYVMM_IT_JAIL=1 TINYVMM_IT_RESTORES=3 TINYVMM_GUEST_DIR=$$guest TINYVMM_ROOTFS=$$rootfs \
	  $(BUILD)/it/$$t; done; \
	sec "$(BUILD)/examples/clash"; TINYVMM_GUEST_DIR=$$guest $(BUILD)/examples/clash; \
	sec "tests/install/run.sh"; bash tests/install/run.sh "$$guest/vmlinux" "$$rootfs"; \
	sec "tests/image/run.sh"; bash tests/image/run.sh "$$guest/vmlinux"; \
	elif [ -n "$$TINYVMM_REQUIRE_KVM" ]; then \
	  sec "FAILED: no usable /dev/kvm on this machine, and TINYVMM_REQUIRE_KVM is set"; exit 1; \
	else \
	  sec "SKIPPED: $(filter-out test_cli_errors,$(IT_BINS:$(BUILD)/it/%=%)), examples/clash, tests/install and tests/image:" \
	    "no usable /dev/kvm on this machine (they boot the guest; TINYVMM_REQUIRE_KVM=1 makes this a failure)."; \
	  sec "$(BUILD)/it/test_cli_errors (what it can find without KVM)"; run $(BUILD)/it/test_cli_errors; \
	  sec "The suites below skip their VM cases too: only what needs no VM is tested"; \
	fi; \
	sec "tests/batch (run --json)"; TINYVMM_GUEST_DIR=$$guest TINYVMM_ROOTFS=$$rootfs \
	  python3 -m unittest discover -s tests/batch; \
	sec "tests/serve/run.sh"; bash tests/serve/run.sh "$$guest/vmlinux" "$$rootfs"; \
	sec "tests/slurm/run.sh"; TINYVMM_GUEST_DIR=$$guest TINYVMM_ROOTFS=$$rootfs bash tests/slurm/run.sh; \
	sec "integration done"

test: check-layers check-symbols format-check unit integration

# Under `make -j test` the checks still come first.
ifneq ($(filter test,$(MAKECMDGOALS)),)
unit integration: | check-layers check-symbols format-check
endif

# No #include points up the layer table or sideways (tools/check-layers.sh).
check-layers:
	@bash tools/check-layers.sh

# libtinyvmm.a exports only tvm_* names, and every public function.
check-symbols: $(BUILD)/libtinyvmm.a
	@bash tools/check-symbols.sh $(BUILD)/libtinyvmm.a

# The C sources follow .clang-format (nothing is rewritten).
format-check:
	@$(CLANG_FORMAT) --dry-run -Werror $(FORMAT_SRCS)

# The Slurm integration test (issue 16): munged, slurmctld and three slurmd
# on this machine (one network namespace each) run tinyvmm job arrays
# through tools/slurm/tinyvmm-array.sbatch (root and /dev/kvm; SKIP
# otherwise; tools/deps.sh installs Debian's slurm packages, the test does
# too when they are missing). Part of `make integration` (so `make test`);
# this target runs it alone.
.PHONY: test-slurm
test-slurm: tinyvmm $(AGENT_BIN)
	@set -e; guest=$$(bash tools/build-guest.sh --print-dir); \
	rootfs=$$(bash tools/build-rootfs.sh --init $(AGENT_BIN) --print-path); \
	TINYVMM_GUEST_DIR=$$guest TINYVMM_ROOTFS=$$rootfs bash tests/slurm/run.sh

FUZZ_SECONDS ?= 60
fuzz: $(FUZZ_BINS)
	@set -e; for f in $(FUZZ_BINS); do echo "== $$f ($(FUZZ_SECONDS) s)"; \
	  mkdir -p $(BUILD)/corpus/$$(basename $$f); \
	  $$f -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 $(BUILD)/corpus/$$(basename $$f) tests/fuzz/seeds/$$(basename $$f); done

bench: all
	@bash tools/bench-boot.sh
	@bash tools/bench-job.sh
	@bash tools/bench-blk.sh
	@bash tools/bench-net.sh
	@bash tools/bench-restore.sh
	@bash tools/bench-serve.sh

# The figures of build/bench/*.json (each bench script writes one) as PNG
# and SVG in build/bench/plots (gnuplot); a missing file skips its figures.
bench-report:
	@python3 tools/bench-report.py $(BUILD)/bench $(BUILD)/bench/plots

# The guest kernel and base image (cached in /var/tmp/tinyvmm-cache), linked
# as build/guest/vmlinux and build/guest/rootfs.ext4: there `./tinyvmm run`
# finds them without flags, and `make install` copies them.
guest: $(AGENT_BIN)
	@guest=$$(bash tools/build-guest.sh --print-dir) && \
	rootfs=$$(bash tools/build-rootfs.sh --init $(AGENT_BIN) --print-path) && \
	ln -sfn "$$guest/vmlinux" $(BUILD)/guest/vmlinux && ln -sfn "$$rootfs" $(BUILD)/guest/rootfs.ext4

# The man page, made from --help and --version (help2man).
$(BUILD)/tinyvmm.1: tinyvmm tools/tinyvmm.h2m
	help2man -N --no-discard-stderr -n "a minimal VMM for throw-away microVMs" -i tools/tinyvmm.h2m -o $@ ./tinyvmm

# make install [PREFIX=/usr/local] [DESTDIR=]: the binary, both libraries, the
# public headers (under include/tinyvmm: pkg-config's -I), tinyvmm.pc, the
# man page, and in share/tinyvmm: the guest kernel and base image of `make
# guest`, where the installed binary looks for them (the image is
# hard-linked from the cache when it can be, else copied sparse), and the
# agent, tools/build-rootfs.sh and guest/rootfs/ for `tinyvmm image build`.
install: tinyvmm $(BUILD)/libtinyvmm.a $(BUILD)/$(SONAME) $(BUILD)/tinyvmm.1 $(AGENT_BIN)
	install -D -m 755 tinyvmm $(DESTDIR)$(PREFIX)/bin/tinyvmm
	install -D -m 644 $(BUILD)/libtinyvmm.a $(DESTDIR)$(PREFIX)/lib/libtinyvmm.a
	install -D -m 755 $(BUILD)/$(SONAME) $(DESTDIR)$(PREFIX)/lib/libtinyvmm.so.$(VERSION)
	ln -sfn libtinyvmm.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/$(SONAME)
	ln -sfn $(SONAME) $(DESTDIR)$(PREFIX)/lib/libtinyvmm.so
	install -D -m 644 vmm/tinyvmm.h $(DESTDIR)$(PREFIX)/include/tinyvmm/tinyvmm.h
	install -D -m 644 vmm/core/tvm_types.h $(DESTDIR)$(PREFIX)/include/tinyvmm/core/tvm_types.h
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' tools/tinyvmm.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/tinyvmm.pc
	install -D -m 644 $(BUILD)/tinyvmm.1 $(DESTDIR)$(PREFIX)/share/man/man1/tinyvmm.1
	install -d $(DESTDIR)$(PREFIX)/share/tinyvmm/tools $(DESTDIR)$(PREFIX)/share/tinyvmm/guest
	install -m 644 tools/build-rootfs.sh $(DESTDIR)$(PREFIX)/share/tinyvmm/tools/build-rootfs.sh
	install -m 755 $(AGENT_BIN) $(DESTDIR)$(PREFIX)/share/tinyvmm/tinyvmm-agent
	install -m 644 vmm/cli/run-result.schema.json $(DESTDIR)$(PREFIX)/share/tinyvmm/run-result.schema.json
	rm -rf $(DESTDIR)$(PREFIX)/share/tinyvmm/guest/rootfs
	cp -R guest/rootfs $(DESTDIR)$(PREFIX)/share/tinyvmm/guest/rootfs
	@if [ -e $(BUILD)/guest/vmlinux ] && [ -e $(BUILD)/guest/rootfs.ext4 ]; then \
	  install -m 644 $(BUILD)/guest/vmlinux $(DESTDIR)$(PREFIX)/share/tinyvmm/vmlinux && \
	  rm -f $(DESTDIR)$(PREFIX)/share/tinyvmm/rootfs.ext4 && \
	  { ln $$(readlink -f $(BUILD)/guest/rootfs.ext4) $(DESTDIR)$(PREFIX)/share/tinyvmm/rootfs.ext4 2>/dev/null || \
	    cp --sparse=always $(BUILD)/guest/rootfs.ext4 $(DESTDIR)$(PREFIX)/share/tinyvmm/rootfs.ext4; }; \
	else echo "install: no guest kernel and image (run make guest first): tinyvmm will need --kernel/--rootfs" >&2; fi
	@if [ -z "$(DESTDIR)" ] && command -v ldconfig >/dev/null; then ldconfig; fi

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/tinyvmm $(DESTDIR)$(PREFIX)/lib/libtinyvmm.a \
	  $(DESTDIR)$(PREFIX)/lib/libtinyvmm.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/$(SONAME) \
	  $(DESTDIR)$(PREFIX)/lib/libtinyvmm.so $(DESTDIR)$(PREFIX)/lib/pkgconfig/tinyvmm.pc \
	  $(DESTDIR)$(PREFIX)/share/man/man1/tinyvmm.1 $(DESTDIR)$(PREFIX)/share/tinyvmm/vmlinux \
	  $(DESTDIR)$(PREFIX)/share/tinyvmm/rootfs.ext4
	rm -rf $(DESTDIR)$(PREFIX)/include/tinyvmm $(DESTDIR)$(PREFIX)/share/tinyvmm/tools \
	  $(DESTDIR)$(PREFIX)/share/tinyvmm/guest $(DESTDIR)$(PREFIX)/share/tinyvmm/tinyvmm-agent \
	  $(DESTDIR)$(PREFIX)/share/tinyvmm/run-result.schema.json
	-rmdir $(DESTDIR)$(PREFIX)/share/tinyvmm

clean:
	rm -rf $(BUILD) tinyvmm

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
