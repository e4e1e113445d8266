# pfr_add_fuzzer(NAME SOURCES src... LIBS lib... CORPUS dir)
# With PFR_FUZZ (clang): a libFuzzer binary, and a ctest that fuzzes for PFR_FUZZ_SECONDS starting
# from the seed corpus. Without it: the same target linked to a driver that replays the corpus, so
# every build still runs the seeds and the crashes we once found.
function(pfr_add_fuzzer name)
  cmake_parse_arguments(F "" "CORPUS" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${F_SOURCES})
  target_link_libraries(${name} PRIVATE ${F_LIBS})
  if(PFR_FUZZ)
    target_compile_options(${name} PRIVATE -fsanitize=fuzzer)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
    if(PFR_BUILD_TESTS)
      set(work ${CMAKE_CURRENT_BINARY_DIR}/${name}-corpus)
      add_test(NAME ${name}
        COMMAND ${CMAKE_COMMAND} -E env ASAN_OPTIONS=detect_leaks=1
          $<TARGET_FILE:${name}> -max_total_time=${PFR_FUZZ_SECONDS} -rss_limit_mb=2048
          -timeout=10 -print_final_stats=1 ${work} ${F_CORPUS})
      set_tests_properties(${name} PROPERTIES LABELS fuzz TIMEOUT 300)
      file(MAKE_DIRECTORY ${work})
    endif()
  else()
    target_sources(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests/fuzz/replay_main.c)
    if(PFR_BUILD_TESTS)
      add_test(NAME ${name} COMMAND $<TARGET_FILE:${name}> ${F_CORPUS})
      set_tests_properties(${name} PROPERTIES LABELS fuzz)
    endif()
  endif()
endfunction()
