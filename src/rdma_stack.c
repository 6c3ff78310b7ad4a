// SPDX-License-Identifier: MIT
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>

#include "fork_page.h"
#include "log.h"
#include "rdma_stack.h"

struct ibv_api ibv;
struct rdmacm_api rdmacm;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const struct config *load_cfg;
static int load_result;
/* Atomic: load() succeeded. */
static bool loaded;
/* The program had loaded librdmacm itself. */
static bool shared_rdmacm;
/* Atomic: rdma_stack_load() was called, here or before a fork. */
static bool load_begun FORK_DATA;
/* This process is a fork child of one that had not begun to load. */
static bool forked_unloaded FORK_DATA;

struct symbol {
	const char *name;
	void **fn;
};

/* dlsym() returns void *; the cast to a function pointer is the POSIX way. */
#define SYMBOL(table, prefix, field)                  \
	{                                             \
#prefix #field, (void **)&table.field \
	}

static const struct symbol verbs_symbols[] = {
	SYMBOL(ibv, ibv_, get_device_list),
	SYMBOL(ibv, ibv_, free_device_list),
	SYMBOL(ibv, ibv_, alloc_pd),
	SYMBOL(ibv, ibv_, dealloc_pd),
	SYMBOL(ibv, ibv_, create_comp_channel),
	SYMBOL(ibv, ibv_, destroy_comp_channel),
	SYMBOL(ibv, ibv_, create_cq),
	SYMBOL(ibv, ibv_, destroy_cq),
	SYMBOL(ibv, ibv_, get_cq_event),
	SYMBOL(ibv, ibv_, ack_cq_events),
	SYMBOL(ibv, ibv_, reg_mr),
	SYMBOL(ibv, ibv_, dereg_mr),
	SYMBOL(ibv, ibv_, wc_status_str),
};

static const struct symbol rdmacm_symbols[] = {
	SYMBOL(rdmacm, rdma_, create_event_channel),
	SYMBOL(rdmacm, rdma_, destroy_event_channel),
	SYMBOL(rdmacm, rdma_, get_cm_event),
	SYMBOL(rdmacm, rdma_, ack_cm_event),
	SYMBOL(rdmacm, rdma_, event_str),
	SYMBOL(rdmacm, rdma_, create_id),
	SYMBOL(rdmacm, rdma_, destroy_id),
	SYMBOL(rdmacm, rdma_, migrate_id),
	SYMBOL(rdmacm, rdma_, set_option),
	SYMBOL(rdmacm, rdma_, bind_addr),
	SYMBOL(rdmacm, rdma_, listen),
	SYMBOL(rdmacm, rdma_, resolve_addr),
	SYMBOL(rdmacm, rdma_, resolve_route),
	SYMBOL(rdmacm, rdma_, connect),
	SYMBOL(rdmacm, rdma_, accept),
	SYMBOL(rdmacm, rdma_, reject),
	SYMBOL(rdmacm, rdma_, disconnect),
	SYMBOL(rdmacm, rdma_, create_qp),
	SYMBOL(rdmacm, rdma_, init_qp_attr),
	SYMBOL(rdmacm, rdma_, destroy_qp),
	SYMBOL(rdmacm, rdma_, get_src_port),
	SYMBOL(rdmacm, rdma_, get_devices),
	SYMBOL(rdmacm, rdma_, free_devices),
};

/* Opens name and fills every symbol's pointer, or says why it cannot. */
static int open_library(const char *name, const struct symbol *symbols,
			size_t count)
{
	/* Never closed: queue pairs and channels live until exit. */
	void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	size_t i;

	/* A host without the RDMA libraries is normal: no warning. */
	if (!lib) {
		log_info("RDMA stack: %s; every connection stays on TCP",
			 dlerror());
		return -ELIBACC;
	}
	for (i = 0; i < count; i++) {
		*symbols[i].fn = dlsym(lib, symbols[i].name);
		if (!*symbols[i].fn) {
			log_warn("RDMA stack: %s has no %s; every connection "
				 "stays on TCP",
				 name, symbols[i].name);
			return -ELIBACC;
		}
	}
	return 0;
}

#define COUNT(array) (sizeof(array) / sizeof((array)[0]))

static void load(void)
{
	const struct config *cfg = load_cfg;
	void *lib;

	load_result = open_library(cfg->libibverbs, verbs_symbols,
				   COUNT(verbs_symbols));
	if (load_result)
		return;
	lib = dlopen(cfg->librdmacm, RTLD_NOW | RTLD_NOLOAD);
	if (lib) {
		shared_rdmacm = true;
		dlclose(lib);
	}
	/* The program's librdmacm may hold what its parent opened. */
	if (shared_rdmacm && forked_unloaded) {
		log_info("RDMA stack: the program loaded librdmacm before this "
			 "fork child; every connection stays on TCP");
		load_result = -ELIBACC;
		return;
	}
	load_result = open_library(cfg->librdmacm, rdmacm_symbols,
				   COUNT(rdmacm_symbols));
	if (load_result)
		return;
	log_info("RDMA stack loaded (%s, %s)", cfg->libibverbs, cfg->librdmacm);
	__atomic_store_n(&loaded, true, __ATOMIC_RELEASE);
}

int rdma_stack_load(const struct config *cfg)
{
	__atomic_store_n(&load_cfg, cfg, __ATOMIC_RELAXED);
	__atomic_store_n(&load_begun, true, __ATOMIC_SEQ_CST);
	pthread_once(&load_once, load);
	return load_result;
}

bool rdma_stack_loaded(void)
{
	return __atomic_load_n(&loaded, __ATOMIC_ACQUIRE);
}

bool rdma_stack_private(void)
{
	return rdma_stack_loaded() && !shared_rdmacm;
}

bool rdma_stack_begun(void)
{
	return __atomic_load_n(&load_begun, __ATOMIC_SEQ_CST);
}

void FORK_CODE rdma_stack_fork_child(void)
{
	if (!__atomic_load_n(&load_begun, __ATOMIC_RELAXED))
		forked_unloaded = true;
}
