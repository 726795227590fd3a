// Compiled into each binary that runs on tcmalloc (tcmalloc_dep in meson.build): nothing here is
// called, but the reference below makes tcmalloc a needed library under --as-needed, so that its
// malloc, not glibc's, serves the process. malloc_name() (core/system_info.h) reports it.
#include <gperftools/tcmalloc.h>

namespace {
[[gnu::used]] const void* const keep_tcmalloc_linked = reinterpret_cast<const void*>(&tc_version);
}  // namespace
