/// @file test_embedded_kernels.cpp
/// @brief Without a GPU: the embedded fatbins hold every configured architecture as machine code,
///        and every kernel the host declares exists there with the host's parameter layout.
#include <catch2/catch.hpp>

#include <string>

#include "device/cuda/abi_check.hpp"
#include "device/cuda/embedded_modules.hpp"
#include "device/cuda/fatbin.hpp"

using namespace fh::cuda;

TEST_CASE("every embedded module matches the host's kernel declarations", "[cuda][abi]") {
    REQUIRE_FALSE(embedded_modules().empty());
    REQUIRE_FALSE(expected_kernels().empty());
    const auto problems = check_embedded_modules();
    std::string all;
    for (const auto& p : problems) all += p + "\n";
    INFO(all);
    CHECK(problems.empty());
}

TEST_CASE("each module carries one cubin per configured architecture and no PTX", "[cuda][abi]") {
    const auto archs = configured_archs();
    REQUIRE_FALSE(archs.empty());
    for (const auto& m : embedded_modules()) {
        INFO("module " << m.name);
        std::vector<unsigned> cubins;
        for (const auto& e : parse_fatbin(m.fatbin)) {
            CHECK(e.kind == FatbinEntry::Kind::cubin);
            if (e.kind == FatbinEntry::Kind::cubin) cubins.push_back(e.arch);
        }
        std::sort(cubins.begin(), cubins.end());
        auto want = archs;
        std::sort(want.begin(), want.end());
        CHECK(cubins == want);
    }
}

TEST_CASE("the ABI comparison catches a wrong declaration", "[cuda][abi]") {
    // The real record of saxpy_f32_kernel(float*, const float*, float, int) ...
    CubinKernel saxpy{"saxpy_f32_kernel", {{0, 0, 8}, {1, 8, 8}, {2, 16, 4}, {3, 20, 4}}, 24};
    static constexpr ParamLayout right[] = {{8, 8}, {8, 8}, {4, 4}, {4, 4}};
    CHECK(compare_kernel_abi(KernelSpec{"m", "saxpy_f32_kernel", right}, saxpy).empty());
    // ... against a host that forgot a parameter, or declared a double instead of a float.
    static constexpr ParamLayout missing[] = {{8, 8}, {8, 8}, {4, 4}};
    CHECK(compare_kernel_abi(KernelSpec{"m", "saxpy_f32_kernel", missing}, saxpy).size() == 1);
    static constexpr ParamLayout wrong_type[] = {{8, 8}, {8, 8}, {8, 8}, {4, 4}};
    CHECK_FALSE(compare_kernel_abi(KernelSpec{"m", "saxpy_f32_kernel", wrong_type}, saxpy).empty());
}

TEST_CASE("host parameter offsets follow each parameter's alignment", "[cuda][abi]") {
    // (float*, float, int, struct of 12 bytes aligned 4, double): nvcc recorded 0, 8, 12, 16, 32.
    static constexpr ParamLayout params[] = {{8, 8}, {4, 4}, {4, 4}, {12, 4}, {8, 8}};
    CHECK(host_param_offsets(params) == std::vector<std::size_t>{0, 8, 12, 16, 32});
}

TEST_CASE("malformed fatbins are rejected, not misread", "[cuda][abi]") {
    const auto& good = embedded_modules().front().fatbin;
    std::vector<std::byte> bytes(good.begin(), good.end());
    SECTION("bad magic") {
        bytes[0] = std::byte{0};
        CHECK_THROWS(parse_fatbin(bytes));
    }
    SECTION("truncated") {
        bytes.resize(40);
        CHECK_THROWS(parse_fatbin(bytes));
    }
    SECTION("cubin cut short") {
        const auto entries = parse_fatbin(good);
        REQUIRE_FALSE(entries.empty());
        const auto payload = entries.front().payload;
        std::vector<std::byte> cut(payload.begin(), payload.begin() + 100);
        CHECK_THROWS(parse_cubin_kernels(cut));
    }
}

TEST_CASE("which embedded cubin serves a device: same major, highest minor not above", "[cuda][abi]") {
    const std::vector<unsigned> archs{80, 86, 90};
    CHECK(cubin_arch_for(8, 0, archs) == 80);  // A100
    CHECK(cubin_arch_for(8, 6, archs) == 86);  // RTX 3050 .. 3090
    CHECK(cubin_arch_for(8, 9, archs) == 86);  // RTX 40xx / L4 run the sm_86 cubin
    CHECK(cubin_arch_for(9, 0, archs) == 90);  // H100 / H200
    CHECK(cubin_arch_for(7, 5, archs) == 0);   // Turing: not embedded
    CHECK(cubin_arch_for(10, 0, archs) == 0);  // Blackwell: rebuild with -Dgpu_archs=...,100
    CHECK(cubin_arch_for(9, 0, std::vector<unsigned>{80, 86}) == 0);
}
