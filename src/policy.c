// SPDX-License-Identifier: MIT
#include "device.h"
#include "policy.h"

enum roceshim_reason policy_decide(const struct config *cfg,
				   const struct roceshim_stats_endpoint *peer,
				   uint16_t service_port)
{
	if (cfg->include.count &&
	    !addr_rules_match(&cfg->include, peer, service_port))
		return ROCESHIM_REASON_EXCLUDED;
	if (addr_rules_match(&cfg->exclude, peer, service_port))
		return ROCESHIM_REASON_EXCLUDED;
	return policy_listener(cfg);
}

enum roceshim_reason policy_listener(const struct config *cfg)
{
	if (!device_count())
		return ROCESHIM_REASON_NO_DEVICE;
	if (!cfg->rdma)
		return ROCESHIM_REASON_DISABLED;
	return ROCESHIM_REASON_NONE;
}
