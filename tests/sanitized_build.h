// Whether this test binary is built with AddressSanitizer: heavy tests run
// a scaled-down version there, since every access costs several times more.
#ifndef UMLAB_TESTS_SANITIZED_BUILD_H_
#define UMLAB_TESTS_SANITIZED_BUILD_H_

namespace umlab::testing {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace umlab::testing

#endif  // UMLAB_TESTS_SANITIZED_BUILD_H_
