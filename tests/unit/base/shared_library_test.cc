// Tests for base/shared_library: opening a real system library (glibc's libm), resolving its
// functions, and the errors for a library or a function that is not there.
#include "base/shared_library.h"

#include <gtest/gtest.h>

namespace air {
namespace {

TEST(SharedLibraryTest, ResolvesFunctionsThatWork) {
  Result<SharedLibrary> libm = SharedLibrary::Open("libm.so.6", "the test", "none");
  ASSERT_TRUE(libm.ok()) << libm.status().message();
  double (*cosine)(double) = nullptr;
  double (*power)(double, double) = nullptr;
  libm->Resolve("cos", &cosine);
  libm->Resolve("pow", &power);
  ASSERT_TRUE(libm->Complete("unused").ok());
  ASSERT_NE(cosine, nullptr);
  EXPECT_DOUBLE_EQ(cosine(0.0), 1.0);
  EXPECT_DOUBLE_EQ(power(2.0, 10.0), 1024.0);
}

TEST(SharedLibraryTest, MissingLibraryNamesItWhyAndTheRemedy) {
  Result<SharedLibrary> missing =
      SharedLibrary::Open("libair-no-such-library.so.7", "the widgets", "install widgets");
  ASSERT_FALSE(missing.ok());
  const std::string message(missing.status().message());
  EXPECT_NE(message.find("cannot load libair-no-such-library.so.7 (the widgets)"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("No such file"), std::string::npos) << message;  // the loader's reason
  EXPECT_NE(message.find("; install widgets"), std::string::npos) << message;
}

TEST(SharedLibraryTest, MissingFunctionIsTheFirstOneNamed) {
  Result<SharedLibrary> libm = SharedLibrary::Open("libm.so.6", "the test", "none");
  ASSERT_TRUE(libm.ok()) << libm.status().message();
  void (*absent)() = nullptr;
  void (*also_absent)() = nullptr;
  double (*cosine)(double) = nullptr;
  libm->Resolve("air_absent_function", &absent);
  libm->Resolve("cos", &cosine);
  libm->Resolve("air_also_absent", &also_absent);
  EXPECT_EQ(absent, nullptr);
  EXPECT_NE(cosine, nullptr);
  const Status status = libm->Complete("needs libm 9");
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.message(), "libm.so.6 has no air_absent_function: needs libm 9");
}

}  // namespace
}  // namespace air
