/* Held-out test driver. Its checks go through rb_check.h: the agent's build prints only the
   values interp_linear returned, and the grader compares them with the expected ones outside
   the agent's process. */
#include <stddef.h>

#include "rb_check.h"

double interp_linear(const double *xs, const double *ys, size_t n, double x);

int main(void) {
    const double xs[] = {0.0, 1.0, 2.5, 4.0};
    const double ys[] = {1.0, 3.0, -2.0, 0.5};
    RB_CHECK_NEAR("node", interp_linear(xs, ys, 4, 1.0), 3.0, 1e-12, 1e-12);
    RB_CHECK_NEAR("inside first", interp_linear(xs, ys, 4, 0.25), 1.5, 1e-12, 1e-12);
    RB_CHECK_NEAR("inside middle", interp_linear(xs, ys, 4, 2.0),
                  3.0 + (2.0 - 1.0) / 1.5 * (-5.0), 1e-12, 1e-12);
    RB_CHECK_NEAR("last node", interp_linear(xs, ys, 4, 4.0), 0.5, 1e-12, 1e-12);
    RB_CHECK_NEAR("clamp left", interp_linear(xs, ys, 4, -3.0), 1.0, 1e-12, 1e-12);
    RB_CHECK_NEAR("clamp right", interp_linear(xs, ys, 4, 9.0), 0.5, 1e-12, 1e-12);
    return 0;
}
