// Whether this test binary is built with AddressSanitizer or ThreadSanitizer:
// heavy tests run a scaled-down version there, since every access costs
// several times more (5-15x under TSan).
#ifndef UMLAB_TESTS_SANITIZED_BUILD_H_
#define UMLAB_TESTS_SANITIZED_BUILD_H_

namespace umlab::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

// ThreadSanitizer alone: the slowest per access of the two, and the one
// whose value in a stress test is the interleavings, not the count.
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kThreadSanitized = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool kThreadSanitized = true;
#else
inline constexpr bool kThreadSanitized = false;
#endif
#else
inline constexpr bool kThreadSanitized = false;
#endif

}  // namespace umlab::testing

#endif  // UMLAB_TESTS_SANITIZED_BUILD_H_
