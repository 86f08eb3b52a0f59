# tinyvmm build. `make` builds libtinyvmm.a and the tinyvmm binary;
# `make test` runs unit tests (ASan+UBSan) and the integration tests that boot
# the real guest; `make fuzz`, `make bench`, `make guest` as named.

CC       ?= gcc
CLANG    ?= clang
BUILD    ?= build
WARN     := -Wall -Wextra -Werror
CFLAGS   ?= -O2 -g
ALL_CFLAGS := -std=gnu11 $(WARN) $(CFLAGS) -I. -D_GNU_SOURCE -MMD -MP
SAN      := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lm -lrt -lpthread)

LIB_DIRS := vmm/core vmm/kvm boot devices/virtio devices/legacy devices/blk devices/vsock devices/net vmm/snapshot vmm
LIB_SRCS := $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c)) guest/protocol.c
CLI_SRCS := $(wildcard vmm/cli/*.c)
LIB_SRCS := $(wildcard $(LIB_SRCS))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/%.o)
SAN_OBJS := $(LIB_SRCS:%.c=$(BUILD)/san/%.o)

UNIT_SRCS := $(wildcard tests/test_*.c)
UNIT_BINS := $(UNIT_SRCS:tests/%.c=$(BUILD)/tests/%)
IT_SRCS   := $(wildcard tests/integration/test_*.c)
IT_BINS   := $(IT_SRCS:tests/integration/%.c=$(BUILD)/it/%)
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(FUZZ_SRCS:tests/fuzz/%.c=$(BUILD)/fuzz/%)
TOOL_SRCS := $(wildcard tools/*.c)
TOOL_BINS := $(TOOL_SRCS:tools/%.c=$(BUILD)/tools/%) $(BUILD)/tools/netbench

.PHONY: all test unit integration fuzz bench guest clean
all: tinyvmm $(BUILD)/libtinyvmm.a $(TOOL_BINS) $(BUILD)/guest/tinyvmm-agent

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/san/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(SAN) -c $< -o $@

$(BUILD)/libtinyvmm.a: $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libtinyvmm-san.a: $(SAN_OBJS)
	@rm -f $@
	ar rcs $@ $^

tinyvmm: $(CLI_SRCS:%.c=$(BUILD)/%.o) $(BUILD)/libtinyvmm.a
	$(CC) $(ALL_CFLAGS) -o $@ $^ -lpthread

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

$(BUILD)/it/%: tests/integration/%.c tests/integration/it_common.h $(BUILD)/libtinyvmm-san.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(SAN) -o $@ $< $(BUILD)/libtinyvmm-san.a $(CHECK_LIBS) -lpthread

# libFuzzer targets: clang with ASan+UBSan; each links the library sources directly.
$(BUILD)/fuzz/%: tests/fuzz/%.c $(LIB_SRCS)
	@mkdir -p $(dir $@)
	$(CLANG) -std=gnu11 -g -O1 -I. -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -o $@ $< $(LIB_SRCS) -lpthread

include guest/agent.mk

unit: $(UNIT_BINS)
	@set -e; for t in $(UNIT_BINS); do echo "== $$t"; $$t; done

# The integration tests boot the guest built by tools/build-guest.sh and the
# base image built by tools/build-rootfs.sh with our agent as /sbin/init
# (both cached outside the clone).
integration: tinyvmm $(IT_BINS) $(AGENT_BIN)
	@set -e; guest=$$(bash tools/build-guest.sh --print-dir); \
	rootfs=$$(bash tools/build-rootfs.sh --init $(AGENT_BIN) --print-path); \
	for t in $(IT_BINS); do echo "== $$t"; TINYVMM_GUEST_DIR=$$guest TINYVMM_ROOTFS=$$rootfs \
	  ASAN_OPTIONS=quarantine_size_mb=4 $$t; done

test: unit integration

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

guest:
	@bash tools/build-guest.sh

clean:
	rm -rf $(BUILD) tinyvmm

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
