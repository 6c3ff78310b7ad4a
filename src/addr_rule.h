/* SPDX-License-Identifier: MIT */
/*
 * Address rules for ROCESHIM_INCLUDE and ROCESHIM_EXCLUDE.
 *
 * Syntax: a comma-separated list of rules, each
 *	ADDR[/PREFIX][:PORT[-PORT]]   e.g. 10.0.0.0/8:29500-29599
 *	[IPV6][/PREFIX][:PORT[-PORT]] e.g. [fd00::]/8:80
 *	IPV6[/PREFIX]                 (no port: brackets optional)
 *	*  or  *:PORT[-PORT]  or  :PORT[-PORT]
 * An IPv4 rule also matches the v4-mapped form of its addresses.  The
 * address is matched against the peer's, the port against the service
 * port (the peer's on connect, the local listening port on accept).
 */
#ifndef ROCESHIM_ADDR_RULE_H
#define ROCESHIM_ADDR_RULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <roceshim/stats.h>

#define ADDR_RULES_MAX 32

struct addr_rule {
	uint8_t addr[16];    /* IPv4 held v4-mapped */
	uint8_t prefix_bits; /* over the 128-bit form */
	uint16_t port_lo;
	uint16_t port_hi;
};

struct addr_rules {
	unsigned int count;
	struct addr_rule rule[ADDR_RULES_MAX];
};

/*
 * Parses text into rules.  Returns 0, or -EINVAL (malformed rule) or
 * -E2BIG (more than ADDR_RULES_MAX rules); on error rules is left empty and
 * the offending rule is copied into bad (bad_size bytes, may be 0).
 */
int addr_rules_parse(struct addr_rules *rules, const char *text, char *bad,
		     size_t bad_size);

bool addr_rules_match(const struct addr_rules *rules,
		      const struct roceshim_stats_endpoint *peer,
		      uint16_t service_port);

/*
 * For a listener, whose peers are not known yet: whether some peer on
 * service_port may match, and whether every peer does (a rule for all
 * addresses: '*' or ':PORT').
 */
bool addr_rules_match_any_peer(const struct addr_rules *rules,
			       uint16_t service_port);
bool addr_rules_match_every_peer(const struct addr_rules *rules,
				 uint16_t service_port);

#endif /* ROCESHIM_ADDR_RULE_H */
