#!/usr/bin/env bash
# The library carries drk's jemalloc copy without showing it: no jemalloc or
# malloc-family symbol among its dynamic symbols (defined or needed), no
# library needed beyond what drk needs without it, no constructor of
# jemalloc's.
# Usage: check_symbols.sh LIBRARY [--sanitized]
set -u
lib=$1 sanitized=${2:-}
fail=0
no() { echo "FAIL: $*"; fail=1; }

family='^(malloc|calloc|realloc|free|cfree|memalign|aligned_alloc|valloc|pvalloc|posix_memalign|malloc_usable_size|reallocarray)$'
jemalloc='(^|_)(je|jemalloc)_|^(mallocx|rallocx|xallocx|sallocx|dallocx|sdallocx|nallocx|mallctl|mallctlnametomib|mallctlbymib|malloc_stats_print|malloc_conf|malloc_message|malloc_conf_2_conf_harder)$|^_Zn[wa]m|^_Zd[la]Pv'

defined=$(nm -D --defined-only "$lib" | awk '{print $3}' | sed 's/@.*//')
undefined=$(nm -D --undefined-only "$lib" | awk '{print $2}' | sed 's/@.*//')
bad=$(echo "$defined" | grep -E "$family|$jemalloc")
[ -z "$bad" ] || no "the library exports: $bad"
bad=$(echo "$undefined" | grep -E "$jemalloc")
[ -z "$bad" ] || no "the library needs jemalloc symbols: $bad"
# drk's copy is linked, and renamed (none of its names left bare).
nm "$lib" | grep -q ' drk_je_mallocx$' || no "drk_je_mallocx is not in the library: the host pool is not linked"
nm "$lib" | grep -qE ' (t|T) (mallocx|mallctl|je_malloc_default)$' && no "jemalloc symbols under their own names"

while read -r needed; do
    case "$needed" in
        libc.so.6|libdl.so.2|libpthread.so.0|ld-linux-x86-64.so.2) ;;
        libasan.so.*|libubsan.so.*) [ -n "$sanitized" ] || no "library needs $needed" ;;
        *) no "library needs $needed (the jemalloc copy must not add libraries)" ;;
    esac
done < <(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')

if [ -z "$sanitized" ]; then
    init=$(readelf -S -W "$lib" | sed -n 's/.*\.init_array *INIT_ARRAY *[0-9a-f]* [0-9a-f]* \([0-9a-f]*\).*/\1/p')
    [ $((16#${init:-0})) -le 8 ] || no ".init_array holds $((16#$init / 8)) entries: jemalloc's constructor?"
fi

[ $fail = 0 ] && echo "host pool symbol checks passed"
exit $fail
