/// @file replay_main.cpp
/// @brief Runs the fuzz harness over files without libFuzzer, so that the corpus can be replayed
///        by g++ builds with any flags (fuzz/replay.sh: -O0 without NDEBUG, ASan + UBSan).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
    std::size_t n = 0;
    for (int i = 1; i < argc; ++i) {
        std::filesystem::path p(argv[i]);
        auto run = [&](const std::filesystem::path& f) {
            std::ifstream in(f, std::ios::binary);
            const std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
            LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(s.data()), s.size());
            ++n;
        };
        if (std::filesystem::is_directory(p))
            for (const auto& e : std::filesystem::directory_iterator(p)) run(e.path());
        else
            run(p);
    }
    std::printf("replayed %zu inputs: no crash, every property held\n", n);
    return 0;
}
