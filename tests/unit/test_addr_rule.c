// SPDX-License-Identifier: MIT
/* Specification of the ROCESHIM_INCLUDE / ROCESHIM_EXCLUDE rule language. */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "addr_rule.h"
#include "endpoint.h"

static struct roceshim_stats_endpoint v4(const char *text)
{
	struct roceshim_stats_endpoint ep;
	struct sockaddr_in sin = { .sin_family = AF_INET };

	assert_int_equal(inet_pton(AF_INET, text, &sin.sin_addr), 1);
	assert_int_equal(endpoint_from_sockaddr(&ep, (void *)&sin, sizeof(sin)),
			 0);
	return ep;
}

static struct roceshim_stats_endpoint v6(const char *text)
{
	struct roceshim_stats_endpoint ep;
	struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6 };

	assert_int_equal(inet_pton(AF_INET6, text, &sin6.sin6_addr), 1);
	assert_int_equal(
		endpoint_from_sockaddr(&ep, (void *)&sin6, sizeof(sin6)), 0);
	return ep;
}

static struct addr_rules parse_ok(const char *text)
{
	struct addr_rules rules;
	char bad[64];

	assert_int_equal(addr_rules_parse(&rules, text, bad, sizeof(bad)), 0);
	return rules;
}

static void ipv4_host_matches_only_itself(void **state)
{
	struct addr_rules r = parse_ok("10.1.2.3");
	struct roceshim_stats_endpoint a = v4("10.1.2.3"), b = v4("10.1.2.4");

	assert_true(addr_rules_match(&r, &a, 1));
	assert_true(addr_rules_match(&r, &a, 65535));
	assert_false(addr_rules_match(&r, &b, 1));
}

static void ipv4_prefix_matches_its_network(void **state)
{
	struct addr_rules r = parse_ok("10.96.0.0/11");
	struct roceshim_stats_endpoint in = v4("10.127.255.255");
	struct roceshim_stats_endpoint out = v4("10.128.0.0");

	assert_true(addr_rules_match(&r, &in, 80));
	assert_false(addr_rules_match(&r, &out, 80));
}

static void ipv4_rule_matches_v4_mapped_peer(void **state)
{
	struct addr_rules r = parse_ok("127.0.0.0/8");
	struct roceshim_stats_endpoint mapped = v6("::ffff:127.0.0.1");

	assert_true(addr_rules_match(&r, &mapped, 29500));
}

static void port_and_port_range_restrict_the_service_port(void **state)
{
	struct addr_rules r = parse_ok("10.0.0.1:80, *:29500-29599");
	struct roceshim_stats_endpoint a = v4("10.0.0.1"), b = v4("1.1.1.1");

	assert_true(addr_rules_match(&r, &a, 80));
	assert_false(addr_rules_match(&r, &a, 81));
	assert_true(addr_rules_match(&r, &b, 29500));
	assert_true(addr_rules_match(&r, &b, 29599));
	assert_false(addr_rules_match(&r, &b, 29600));
}

static void port_only_rule_matches_every_address(void **state)
{
	struct addr_rules r = parse_ok(":22");
	struct roceshim_stats_endpoint a = v6("2001:db8::1");

	assert_true(addr_rules_match(&r, &a, 22));
	assert_false(addr_rules_match(&r, &a, 23));
}

static void bracketed_ipv6_takes_prefix_and_port(void **state)
{
	struct addr_rules r = parse_ok("[fd00::]/8:443");
	struct roceshim_stats_endpoint in = v6("fdff::1"), out = v6("fe00::1");

	assert_true(addr_rules_match(&r, &in, 443));
	assert_false(addr_rules_match(&r, &in, 444));
	assert_false(addr_rules_match(&r, &out, 443));
}

static void bare_ipv6_without_port_is_accepted(void **state)
{
	struct addr_rules r = parse_ok("::1, fe80::/10");
	struct roceshim_stats_endpoint lo = v6("::1"), ll = v6("fe80::2");

	assert_int_equal(r.count, 2);
	assert_true(addr_rules_match(&r, &lo, 5));
	assert_true(addr_rules_match(&r, &ll, 5));
}

static void wildcard_matches_everything(void **state)
{
	struct addr_rules r = parse_ok("*");
	struct roceshim_stats_endpoint a = v4("8.8.8.8"), b = v6("::2");

	assert_true(addr_rules_match(&r, &a, 0));
	assert_true(addr_rules_match(&r, &b, 65535));
}

static void
listener_port_may_match_a_peer_only_in_a_rule_port_range(void **state)
{
	struct addr_rules r = parse_ok("10.0.0.0/8:29500-29599");

	assert_true(addr_rules_match_any_peer(&r, 29500));
	assert_true(addr_rules_match_any_peer(&r, 29599));
	assert_false(addr_rules_match_any_peer(&r, 80));
}

static void only_an_all_address_rule_matches_every_peer_of_a_port(void **state)
{
	struct addr_rules some = parse_ok("10.0.0.0/8,[fd00::]/8:80");
	struct addr_rules all = parse_ok("*:80,:443");

	assert_false(addr_rules_match_every_peer(&some, 80));
	assert_true(addr_rules_match_every_peer(&all, 80));
	assert_true(addr_rules_match_every_peer(&all, 443));
	assert_false(addr_rules_match_every_peer(&all, 8080));
}

static void no_rules_match_no_peer_of_a_listener(void **state)
{
	struct addr_rules r = parse_ok("");

	assert_false(addr_rules_match_any_peer(&r, 1));
	assert_false(addr_rules_match_every_peer(&r, 1));
}

static void empty_text_is_no_rules(void **state)
{
	struct addr_rules r = parse_ok("");
	struct roceshim_stats_endpoint a = v4("1.2.3.4");

	assert_int_equal(r.count, 0);
	assert_false(addr_rules_match(&r, &a, 1));
}

static void malformed_rules_are_rejected_and_named(void **state)
{
	static const char *const bad[] = {
		"10.0.0.1/33",	 "10.0.0.256",	  "[::1",	"[::1]x",
		"1.2.3.4:70000", "1.2.3.4:20-10", ":",		"*/8",
		"1.2.3.4:",	 "1.2.3.4/",	  "1.2.3.4/-1", "::1/129",
		"host.example",	 "1.2.3.4:8a",	  "[::1]/64:",	"[]",
		"1.2.3.4:-80",	 "a,,b",	  " , ",	"1.2.3.4:1-",
	};
	struct addr_rules rules;
	char bad_rule[64];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		rules.count = 7;
		assert_int_equal(addr_rules_parse(&rules, bad[i], bad_rule,
						  sizeof(bad_rule)),
				 -EINVAL);
		assert_int_equal(rules.count, 0);
		assert_true(strlen(bad_rule) > 0 || bad[i][0] == ' ');
	}
}

static void offending_rule_is_reported(void **state)
{
	struct addr_rules rules;
	char bad[64];

	assert_int_equal(addr_rules_parse(&rules, "10.0.0.0/8, 300.1.1.1", bad,
					  sizeof(bad)),
			 -EINVAL);
	assert_string_equal(bad, "300.1.1.1");
}

static void overlong_rule_is_rejected(void **state)
{
	char text[400];
	struct addr_rules rules;
	char bad[64];

	memset(text, '1', sizeof(text) - 1);
	text[sizeof(text) - 1] = '\0';
	assert_int_equal(addr_rules_parse(&rules, text, bad, sizeof(bad)),
			 -EINVAL);
	assert_int_equal(strlen(bad), sizeof(bad) - 1);
}

static void more_than_the_maximum_is_e2big(void **state)
{
	char text[ADDR_RULES_MAX * 4 + 8] = "";
	struct addr_rules rules;
	int i;

	for (i = 0; i <= ADDR_RULES_MAX; i++)
		strcat(text, i ? ",:1" : ":1");
	assert_int_equal(addr_rules_parse(&rules, text, NULL, 0), -E2BIG);
	assert_int_equal(rules.count, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(ipv4_host_matches_only_itself),
		cmocka_unit_test(ipv4_prefix_matches_its_network),
		cmocka_unit_test(ipv4_rule_matches_v4_mapped_peer),
		cmocka_unit_test(port_and_port_range_restrict_the_service_port),
		cmocka_unit_test(port_only_rule_matches_every_address),
		cmocka_unit_test(bracketed_ipv6_takes_prefix_and_port),
		cmocka_unit_test(bare_ipv6_without_port_is_accepted),
		cmocka_unit_test(wildcard_matches_everything),
		cmocka_unit_test(
			listener_port_may_match_a_peer_only_in_a_rule_port_range),
		cmocka_unit_test(
			only_an_all_address_rule_matches_every_peer_of_a_port),
		cmocka_unit_test(no_rules_match_no_peer_of_a_listener),
		cmocka_unit_test(empty_text_is_no_rules),
		cmocka_unit_test(malformed_rules_are_rejected_and_named),
		cmocka_unit_test(offending_rule_is_reported),
		cmocka_unit_test(overlong_rule_is_rejected),
		cmocka_unit_test(more_than_the_maximum_is_e2big),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
