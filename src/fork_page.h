/* SPDX-License-Identifier: MIT */
/*
 * Where the fork handlers' state and code live.
 *
 * After a fork, each page of data that the parent or the child writes is
 * copied once, and each page of code that the child runs first is faulted
 * in.  So a fork costs what its handlers touch, page by page, more than
 * what they do: the state they write (FORK_DATA) and the handlers
 * themselves with what they call on a fork of a process without RDMA
 * connections (FORK_CODE) are kept together, on a page or two each.
 */
#ifndef ROCESHIM_FORK_PAGE_H
#define ROCESHIM_FORK_PAGE_H

#define FORK_DATA __attribute__((section("roceshim_fork_data")))
#define FORK_CODE __attribute__((section("roceshim_fork_text")))

#endif /* ROCESHIM_FORK_PAGE_H */
