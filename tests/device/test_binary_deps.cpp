/// @file test_binary_deps.cpp
/// @brief The foxhunt-train binary links no run-time compiler (libnvrtc), the CUDA runtime
///        statically, spdlog/fmt/toml++ compiled in, no shared library of theirs (so it runs
///        on the GPU machine), and cuBLAS loaded on first use, not linked (src/device/cuda/cublas_loader.cpp).
#include <catch2/catch.hpp>
#include <cublas_v2.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "device/cuda/fatbin.hpp"

TEST_CASE("foxhunt-train neither links nor names libnvrtc", "[cuda][binary]") {
    const char* exe = std::getenv("FH_TRAIN_EXE");
    if (exe == nullptr) FAIL("FH_TRAIN_EXE is not set (meson test sets it to build/foxhunt-train)");
    std::ifstream in(exe, std::ios::binary);
    REQUIRE(in.good());
    const std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    REQUIRE(raw.size() > 1000);
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(raw.data()), raw.size());

    const auto needed = fh::cuda::elf_needed_libraries(bytes);
    REQUIRE_FALSE(needed.empty());
    for (const auto& lib : needed) {
        INFO("DT_NEEDED " << lib);
        CHECK(lib.find("nvrtc") == std::string::npos);
        CHECK(lib.find("libcudart") == std::string::npos);  // linked statically
        CHECK(lib.find("spdlog") == std::string::npos);
        CHECK(lib.find("fmt") == std::string::npos);
        CHECK(lib.find("toml") == std::string::npos);
        CHECK(lib.find("libcublas") == std::string::npos);  // opened on first use
    }

    // dlopen would need the library's name somewhere in the file.
    const std::string haystack(raw.begin(), raw.end());
    CHECK(haystack.find("libnvrtc") == std::string::npos);
    CHECK(haystack.find("libcublasLt.so.") != std::string::npos);
}

TEST_CASE("cuBLAS entry points forward to the library, opened on first use", "[cuda][binary]") {
    // The forwarder opens libcublas (it needs no GPU for this function) and calls its function.
    CHECK(std::string(cublasGetStatusName(CUBLAS_STATUS_SUCCESS)) == "CUBLAS_STATUS_SUCCESS");
    CHECK(std::string(cublasGetStatusName(CUBLAS_STATUS_INVALID_VALUE)) == "CUBLAS_STATUS_INVALID_VALUE");
}
