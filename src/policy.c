// SPDX-License-Identifier: MIT
#include <stdbool.h>

#include "device.h"
#include "fd_room.h"
#include "log.h"
#include "policy.h"

static bool fd_limit_logged;
/* atomic: why RDMA stopped (policy_stop_rdma()), NONE while it has not */
static unsigned int rdma_stopped;

bool policy_stop_rdma(enum roceshim_reason why)
{
	unsigned int none = ROCESHIM_REASON_NONE;

	return __atomic_compare_exchange_n(&rdma_stopped, &none, why, false,
					   __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

bool policy_rdma_stopped(void)
{
	return __atomic_load_n(&rdma_stopped, __ATOMIC_SEQ_CST);
}

static enum roceshim_reason rdma_available(const struct config *cfg)
{
	enum roceshim_reason reason;

	/* Checked first: with the path off, the RDMA stack is never loaded. */
	if (!cfg->rdma)
		return ROCESHIM_REASON_DISABLED;
	reason = __atomic_load_n(&rdma_stopped, __ATOMIC_SEQ_CST);
	if (reason)
		return reason;
	/* A host without RDMA pays nothing for the descriptor check. */
	reason = device_status(cfg);
	if (reason)
		return reason;
	if (fd_room())
		return ROCESHIM_REASON_NONE;
	if (!__atomic_exchange_n(&fd_limit_logged, true, __ATOMIC_RELAXED))
		log_info("within %d descriptors of RLIMIT_NOFILE: new "
			 "connections stay on TCP (fd_limit)",
			 FD_ROOM_SPARE);
	return ROCESHIM_REASON_FD_LIMIT;
}

enum roceshim_reason policy_decide(const struct config *cfg,
				   const struct roceshim_stats_endpoint *peer,
				   uint16_t service_port)
{
	if (cfg->include.count &&
	    !addr_rules_match(&cfg->include, peer, service_port))
		return ROCESHIM_REASON_EXCLUDED;
	if (addr_rules_match(&cfg->exclude, peer, service_port))
		return ROCESHIM_REASON_EXCLUDED;
	return rdma_available(cfg);
}

enum roceshim_reason policy_listener(const struct config *cfg, uint16_t port)
{
	if (cfg->include.count &&
	    !addr_rules_match_any_peer(&cfg->include, port))
		return ROCESHIM_REASON_EXCLUDED;
	if (addr_rules_match_every_peer(&cfg->exclude, port))
		return ROCESHIM_REASON_EXCLUDED;
	return rdma_available(cfg);
}
