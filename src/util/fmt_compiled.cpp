/// @file fmt_compiled.cpp
/// @brief fmt's compiled part, built once here instead of in every translation unit.
///
/// The binary must not need a shared libfmt (the GPU machines have none) and Debian ships no
/// static one, so fmt used to be header-only: every file that formatted compiled fmt's whole
/// implementation again (about 3.4 s of each file's compile time at -O3). The top-level
/// meson.build defines FMT_HEADER_ONLY only for an fmt this file does not know; for fmt 9 this
/// file is fmt's own src/format.cc: its implementation (format-inl.h) and the explicit
/// instantiations that format.h declares `extern`.
#ifndef FMT_HEADER_ONLY

#include <fmt/format-inl.h>

#if FMT_VERSION < 90000 || FMT_VERSION >= 100000
#error "fmt_compiled.cpp instantiates fmt 9's templates; meson.build should have chosen FMT_HEADER_ONLY"
#endif

FMT_BEGIN_NAMESPACE
namespace detail {

template FMT_API auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template FMT_API auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;

#ifndef FMT_STATIC_THOUSANDS_SEPARATOR
template FMT_API locale_ref::locale_ref(const std::locale& loc);
template FMT_API auto locale_ref::get<std::locale>() const -> std::locale;
#endif

template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template FMT_API auto decimal_point_impl(locale_ref) -> char;
template FMT_API void buffer<char>::append(const char*, const char*);
template FMT_API void vformat_to(buffer<char>&, string_view, basic_format_args<FMT_BUFFER_CONTEXT(char)>, locale_ref);

template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<wchar_t>;
template FMT_API auto decimal_point_impl(locale_ref) -> wchar_t;
template FMT_API void buffer<wchar_t>::append(const wchar_t*, const wchar_t*);

}  // namespace detail
FMT_END_NAMESPACE

#endif  // FMT_HEADER_ONLY
