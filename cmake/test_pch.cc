// The precompiled headers of the test binaries (gtest and gmock besides the common ones).
