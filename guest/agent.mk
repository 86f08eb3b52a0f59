# Guest agent (guest/agent*.c + guest/protocol.c), included by the top
# Makefile. Two builds:
#   $(AGENT_BIN)      static, -Os, stripped: /sbin/init of the guest
#   $(AGENT_SAN_BIN)  ASan+UBSan, dynamic: run on the host by tests/test_agent
# The tests find them through TINYVMM_AGENT_BIN / TINYVMM_AGENT_STATIC.

AGENT_SRCS    := $(wildcard guest/agent*.c) guest/protocol.c
AGENT_HDRS    := $(wildcard guest/agent*.h) guest/protocol.h
AGENT_BIN     := $(BUILD)/guest/tinyvmm-agent
AGENT_SAN_BIN := $(BUILD)/guest/tinyvmm-agent-san
AGENT_CFLAGS  := -std=gnu11 -Wall -Wextra -Werror -I. -D_GNU_SOURCE

$(AGENT_BIN): $(AGENT_SRCS) $(AGENT_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(AGENT_CFLAGS) -Os -static -s -ffunction-sections -fdata-sections -Wl,--gc-sections -o $@ $(AGENT_SRCS)

$(AGENT_SAN_BIN): $(AGENT_SRCS) $(AGENT_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(AGENT_CFLAGS) -O1 -g $(SAN) -o $@ $(AGENT_SRCS)

.PHONY: agent
agent: $(AGENT_BIN) $(AGENT_SAN_BIN)

# tests/test_agent*.c run the agent binaries.
$(filter $(BUILD)/tests/test_agent%,$(UNIT_BINS)): $(AGENT_BIN) $(AGENT_SAN_BIN)
unit: export TINYVMM_AGENT_BIN := $(abspath $(AGENT_SAN_BIN))
unit: export TINYVMM_AGENT_STATIC := $(abspath $(AGENT_BIN))
