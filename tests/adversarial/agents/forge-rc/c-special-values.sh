# C, vacuous values: the function returns NaN, and the agent's `printf` prints every value
# specially (`1e999`, `-nan`, hex floats) so that a lax parser reads something that compares
# equal.
if [ -f interp.c ]; then
  cat > interp.c <<'C'
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
double interp_linear(const double *xs, const double *ys, size_t n, double x) { (void)xs; (void)ys; (void)n; (void)x; return 0.0 / 0.0; }
static int calls = 0;
int printf(const char *fmt, ...) {
    char buf[4096];
    va_list ap; va_start(ap, fmt);
    int k = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (strcmp(fmt, " %.17g") == 0) {
        const char *forms[] = {" 1e999", " -nan", " 0x1p+1", " NaN", " inf"};
        k = snprintf(buf, sizeof buf, "%s", forms[calls++ % 5]);
    }
    if (k > 0) fwrite(buf, 1, (size_t)k < sizeof buf ? (size_t)k : sizeof buf - 1, stdout);
    return k;
}
C
fi
