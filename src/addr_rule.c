// SPDX-License-Identifier: MIT
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "addr_rule.h"

#define RULE_TEXT_MAX 128

static int parse_port(const char *s, uint16_t *port)
{
	char *end;
	unsigned long v;

	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v > 65535)
		return -EINVAL;
	*port = v;
	return 0;
}

static int parse_port_range(char *s, struct addr_rule *rule)
{
	char *dash = strchr(s, '-');

	if (dash) {
		*dash = '\0';
		if (parse_port(s, &rule->port_lo) ||
		    parse_port(dash + 1, &rule->port_hi))
			return -EINVAL;
		return rule->port_lo <= rule->port_hi ? 0 : -EINVAL;
	}
	if (parse_port(s, &rule->port_lo))
		return -EINVAL;
	rule->port_hi = rule->port_lo;
	return 0;
}

static int parse_prefix(const char *s, unsigned int max, unsigned int *bits)
{
	char *end;
	unsigned long v;

	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v > max)
		return -EINVAL;
	*bits = v;
	return 0;
}

/* Parses ADDR (IPv4, IPv6, "*" or empty for any) and an optional prefix. */
static int parse_address(const char *addr, const char *prefix,
			 struct addr_rule *rule)
{
	struct in_addr v4;
	unsigned int bits;

	if (!*addr || !strcmp(addr, "*")) {
		rule->prefix_bits = 0;
		return prefix ? -EINVAL : 0;
	}
	if (inet_pton(AF_INET, addr, &v4) == 1) {
		rule->addr[10] = 0xff;
		rule->addr[11] = 0xff;
		memcpy(rule->addr + 12, &v4, 4);
		bits = 32;
		if (prefix && parse_prefix(prefix, 32, &bits))
			return -EINVAL;
		rule->prefix_bits = 96 + bits;
		return 0;
	}
	if (inet_pton(AF_INET6, addr, rule->addr) == 1) {
		bits = 128;
		if (prefix && parse_prefix(prefix, 128, &bits))
			return -EINVAL;
		rule->prefix_bits = bits;
		return 0;
	}
	return -EINVAL;
}

/* Splits "[ADDR]/PREFIX:PORT" (every part after ADDR optional). */
static int split_bracketed(char *s, char **prefix, char **port)
{
	char *rest = strchr(s, ']');

	if (!rest)
		return -EINVAL;
	*rest++ = '\0';
	if (*rest == '/') {
		*rest++ = '\0';
		*prefix = rest;
		rest = strchr(rest, ':');
		if (!rest)
			return 0;
	} else if (*rest != ':') {
		return *rest ? -EINVAL : 0;
	}
	*rest++ = '\0';
	*port = rest;
	return 0;
}

/* Splits "ADDR/PREFIX:PORT"; a text with several colons is bare IPv6. */
static void split_plain(char *s, char **prefix, char **port)
{
	char *colon = strchr(s, ':');
	char *slash;

	if (colon && !strchr(colon + 1, ':')) {
		*colon = '\0';
		*port = colon + 1;
	}
	slash = strchr(s, '/');
	if (slash) {
		*slash = '\0';
		*prefix = slash + 1;
	}
}

static int parse_rule(char *s, struct addr_rule *rule)
{
	char *prefix = NULL;
	char *port = NULL;

	memset(rule, 0, sizeof(*rule));
	rule->port_hi = 65535;
	if (*s == '[') {
		s++;
		if (split_bracketed(s, &prefix, &port) || !*s)
			return -EINVAL;
	} else {
		split_plain(s, &prefix, &port);
	}
	if (port && parse_port_range(port, rule))
		return -EINVAL;
	return parse_address(s, prefix, rule);
}

static char *trim(char *s)
{
	char *end;

	while (isspace((unsigned char)*s))
		s++;
	end = s + strlen(s);
	while (end > s && isspace((unsigned char)end[-1]))
		*--end = '\0';
	return s;
}

static void copy_bad(char *bad, size_t bad_size, const char *text)
{
	if (!bad_size)
		return;
	strncpy(bad, text, bad_size - 1);
	bad[bad_size - 1] = '\0';
}

int addr_rules_parse(struct addr_rules *rules, const char *text, char *bad,
		     size_t bad_size)
{
	char buf[RULE_TEXT_MAX];
	const char *item = text;
	char *rule_text = buf;
	int ret;

	rules->count = 0;
	copy_bad(bad, bad_size, "");
	while (item && *item) {
		const char *comma = strchr(item, ',');
		size_t len = comma ? (size_t)(comma - item) : strlen(item);
		char work[RULE_TEXT_MAX];

		ret = -EINVAL;
		if (len >= sizeof(buf)) {
			memcpy(buf, item, sizeof(buf) - 1);
			buf[sizeof(buf) - 1] = '\0';
			goto fail;
		}
		memcpy(buf, item, len);
		buf[len] = '\0';
		rule_text = trim(buf);
		item = comma ? comma + 1 : NULL;
		if (!*rule_text)
			goto fail;
		if (rules->count == ADDR_RULES_MAX) {
			ret = -E2BIG;
			goto fail;
		}
		strcpy(work, rule_text);
		ret = parse_rule(work, &rules->rule[rules->count]);
		if (ret)
			goto fail;
		rules->count++;
	}
	return 0;
fail:
	copy_bad(bad, bad_size, rule_text);
	rules->count = 0;
	return ret;
}

static bool prefix_matches(const uint8_t *a, const uint8_t *b,
			   unsigned int bits)
{
	unsigned int bytes = bits / 8;
	unsigned int rest = bits % 8;
	uint8_t mask;

	if (memcmp(a, b, bytes))
		return false;
	if (!rest)
		return true;
	mask = (uint8_t)(0xff << (8 - rest));
	return (a[bytes] & mask) == (b[bytes] & mask);
}

bool addr_rules_match(const struct addr_rules *rules,
		      const struct roceshim_stats_endpoint *peer,
		      uint16_t service_port)
{
	unsigned int i;

	for (i = 0; i < rules->count; i++) {
		const struct addr_rule *r = &rules->rule[i];

		if (service_port < r->port_lo || service_port > r->port_hi)
			continue;
		if (prefix_matches(r->addr, peer->addr, r->prefix_bits))
			return true;
	}
	return false;
}

bool addr_rules_match_any_peer(const struct addr_rules *rules,
			       uint16_t service_port)
{
	unsigned int i;

	for (i = 0; i < rules->count; i++) {
		const struct addr_rule *r = &rules->rule[i];

		if (service_port >= r->port_lo && service_port <= r->port_hi)
			return true;
	}
	return false;
}

bool addr_rules_match_every_peer(const struct addr_rules *rules,
				 uint16_t service_port)
{
	unsigned int i;

	for (i = 0; i < rules->count; i++) {
		const struct addr_rule *r = &rules->rule[i];

		if (!r->prefix_bits && service_port >= r->port_lo &&
		    service_port <= r->port_hi)
			return true;
	}
	return false;
}
