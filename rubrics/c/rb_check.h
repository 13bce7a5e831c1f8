/* rb_check.h: check macros for research-bench's C/C++ test drivers (the `c_test` grader).
 *
 * The grader builds a driver that includes this header twice, and neither build decides
 * anything:
 *   -DRB_EXPECTED  the driver alone, without the agent's sources, run as the task author's
 *                  uid: every check prints its expected value and tolerance;
 *   -DRB_ACTUAL    the driver's object linked with the agent's sources, run as the agent's
 *                  uid: every check prints only the value the agent's code produced (the
 *                  expected expression and the tolerance are not compiled into it).
 * The grader compares the two printed lists outside both processes.
 *
 * Rules for a driver: the checks run in the same order whatever the agent's code returns (no
 * control flow on actual values) and live in one translation unit; the driver declares the
 * functions it calls itself (it is compiled without the agent's files on its include path);
 * its expected side calls no agent function.
 *
 *   RB_CHECK_NEAR(name, actual, expected, rtol, atol)   doubles: |a - e| <= atol + rtol * |e|
 *                                                       (NaN only equals NaN, inf itself)
 *   RB_CHECK_INT(name, actual, expected)                integers, exactly
 *   RB_CHECK_ARRAY_NEAR(name, actual, n_actual, expected, n_expected, rtol, atol)
 *                                                       double arrays: the lengths must be
 *                                                       equal, then every element is near
 */
#ifndef RB_CHECK_H
#define RB_CHECK_H

#include <stdio.h>

#if defined(RB_ACTUAL) && defined(RB_EXPECTED)
#error "rb_check.h: RB_ACTUAL and RB_EXPECTED exclude each other"
#endif
#if !defined(RB_ACTUAL) && !defined(RB_EXPECTED)
#error "rb_check.h: build through research-bench's c_test grader (it defines RB_ACTUAL or RB_EXPECTED)"
#endif

static long rb_check_index_ = 0;

static inline void rb_check_head_(char side, char kind, const char *name, long n) {
    const unsigned char *p = (const unsigned char *)name;
    printf("@rb %c %ld %c ", side, rb_check_index_++, kind);
    if (!*p) {
        printf("-");
    }
    for (; *p; ++p) {
        printf("%02x", (unsigned)*p);
    }
    printf(" %ld", n);
}

static inline void rb_check_end_(void) {
    printf("\n");
    fflush(stdout);
}

#ifdef RB_EXPECTED
static inline void rb_check_f_(const char *name, double want, double rtol, double atol) {
    rb_check_head_('E', 'f', name, 1);
    printf(" %.17g %.17g %.17g", rtol, atol, want);
    rb_check_end_();
}
static inline void rb_check_i_(const char *name, long long want) {
    rb_check_head_('E', 'i', name, 1);
    printf(" 0 0 %lld", want);
    rb_check_end_();
}
static inline void rb_check_fa_(const char *name, const double *want, long n, double rtol,
                                double atol) {
    long i;
    rb_check_head_('E', 'F', name, n < 0 ? 0 : n);
    printf(" %.17g %.17g", rtol, atol);
    for (i = 0; i < n; ++i) {
        printf(" %.17g", want[i]);
    }
    rb_check_end_();
}
#define RB_CHECK_NEAR(name, actual, expected, rtol, atol) \
    rb_check_f_((name), (double)(expected), (double)(rtol), (double)(atol))
#define RB_CHECK_INT(name, actual, expected) rb_check_i_((name), (long long)(expected))
#define RB_CHECK_ARRAY_NEAR(name, actual, n_actual, expected, n_expected, rtol, atol) \
    rb_check_fa_((name), (expected), (long)(n_expected), (double)(rtol), (double)(atol))
#else
static inline void rb_check_f_(const char *name, double got) {
    rb_check_head_('A', 'f', name, 1);
    printf(" %.17g", got);
    rb_check_end_();
}
static inline void rb_check_i_(const char *name, long long got) {
    rb_check_head_('A', 'i', name, 1);
    printf(" %lld", got);
    rb_check_end_();
}
static inline void rb_check_fa_(const char *name, const double *got, long n) {
    long i;
    rb_check_head_('A', 'F', name, (got == NULL || n < 0) ? 0 : n);
    for (i = 0; got != NULL && i < n; ++i) {
        printf(" %.17g", got[i]);
    }
    rb_check_end_();
}
#define RB_CHECK_NEAR(name, actual, expected, rtol, atol) rb_check_f_((name), (double)(actual))
#define RB_CHECK_INT(name, actual, expected) rb_check_i_((name), (long long)(actual))
#define RB_CHECK_ARRAY_NEAR(name, actual, n_actual, expected, n_expected, rtol, atol) \
    rb_check_fa_((name), (actual), (long)(n_actual))
#endif

#endif /* RB_CHECK_H */
