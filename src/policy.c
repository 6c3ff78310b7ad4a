// SPDX-License-Identifier: MIT
#include "device.h"
#include "fd_room.h"
#include "policy.h"

static enum roceshim_reason rdma_available(const struct config *cfg)
{
	/* Checked first: with the path off, the RDMA stack is never loaded. */
	if (!cfg->rdma)
		return ROCESHIM_REASON_DISABLED;
	if (!fd_room())
		return ROCESHIM_REASON_RESOURCE;
	return device_status(cfg);
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
