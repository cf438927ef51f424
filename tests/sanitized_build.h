// Whether this test binary is built with AddressSanitizer or ThreadSanitizer:
// heavy tests run a scaled-down version there, since every access costs
// several times more (5-15x under TSan).
#ifndef UMLAB_TESTS_SANITIZED_BUILD_H_
#define UMLAB_TESTS_SANITIZED_BUILD_H_

// clang says which sanitizer it builds with through __has_feature, gcc
// through __SANITIZE_*__ (gcc 12 has no __has_feature).
#if defined(__has_feature)
#define UMLAB_TESTS_HAS_FEATURE(feature) __has_feature(feature)
#else
#define UMLAB_TESTS_HAS_FEATURE(feature) 0
#endif

namespace umlab::testing {

// ThreadSanitizer alone: the slowest per access of the two, and the one
// whose value in a stress test is the interleavings, not the count.
inline constexpr bool kThreadSanitized =
#if defined(__SANITIZE_THREAD__) || UMLAB_TESTS_HAS_FEATURE(thread_sanitizer)
    true;
#else
    false;
#endif

inline constexpr bool kSanitized =
#if defined(__SANITIZE_ADDRESS__) || UMLAB_TESTS_HAS_FEATURE(address_sanitizer)
    true;
#else
    kThreadSanitized;
#endif

}  // namespace umlab::testing

#endif  // UMLAB_TESTS_SANITIZED_BUILD_H_
