/* Unsafe string and time functions, banned at compile time (git's banned.h);
 * a copy of common/banned.h so that kernels/ builds on its own.
 * Use snprintf with a truncation check, strtol with a range check,
 * gmtime_r/localtime_r. Included last, after every system header, by each file here. */
#ifndef KERNELS_BANNED_H
#define KERNELS_BANNED_H

#define BANNED(func) sorry_##func##_is_a_banned_function

#undef strcpy
#define strcpy(x, y) BANNED(strcpy)
#undef strcat
#define strcat(x, y) BANNED(strcat)
#undef sprintf
#define sprintf(...) BANNED(sprintf)
#undef vsprintf
#define vsprintf(...) BANNED(vsprintf)
#undef strtok
#define strtok(x, y) BANNED(strtok)
#undef atoi
#define atoi(x) BANNED(atoi)
#undef atol
#define atol(x) BANNED(atol)
#undef gmtime
#define gmtime(x) BANNED(gmtime)
#undef localtime
#define localtime(x) BANNED(localtime)

#endif
