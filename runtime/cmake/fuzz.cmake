# libFuzzer targets for the readers of untrusted files (not in CI; clang
# only): .npy (deltac run's inputs), the tuning database, safetensors (the
# C++ layers' weights). ASan + UBSan. docs/fuzzing.md has the commands
# and what they found.
option(DELTAC_BUILD_FUZZ "Build the libFuzzer targets (clang)" OFF)
if(DELTAC_BUILD_FUZZ)
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    function(deltac_fuzz name source)
      add_executable(${name} ${source} ${ARGN})
      target_compile_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined -g)
      target_link_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined)
    endfunction()
    set(fuzz_dir ${PROJECT_SOURCE_DIR}/tests/fuzz)
    deltac_fuzz(deltac_fuzz_npy ${fuzz_dir}/fuzz_npy.cpp src/npy.cpp)
    target_include_directories(deltac_fuzz_npy PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/include)
    deltac_fuzz(deltac_fuzz_tuning_db ${fuzz_dir}/fuzz_tuning_db.cpp
                ${PROJECT_SOURCE_DIR}/catalogue/src/tuning_db.cpp)
    target_link_libraries(deltac_fuzz_tuning_db PRIVATE deltac_catalogue nlohmann_json::nlohmann_json)
    if(TARGET deltac_nn)
      deltac_fuzz(deltac_fuzz_safetensors ${PROJECT_SOURCE_DIR}/tests/nn/fuzz_safetensors.cpp
                  src/safetensors.cpp)
      target_include_directories(deltac_fuzz_safetensors PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/include)
      target_link_libraries(deltac_fuzz_safetensors PRIVATE nlohmann_json::nlohmann_json)
    endif()
  else()
    message(WARNING "deltac: DELTAC_BUILD_FUZZ needs clang (CMAKE_CXX_COMPILER=clang++); skipped")
  endif()
endif()
