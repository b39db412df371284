// The target that owns the precompiled headers every other target reuses
// (CMakeLists.txt, TORCHXD_PCH): nothing to compile of its own.
