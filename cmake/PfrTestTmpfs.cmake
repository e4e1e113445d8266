# pfr_tests_in_tmpfs(): the tests of the calling folder make their files in /dev/shm ($TMPDIR).
# The store commits with synchronous = FULL, so rings on a disk-backed /tmp wait on an fsync per
# commit (test_slice: 86 s against 57 s in tmpfs, gcc tree, both under the same load). Nothing
# such a test checks is about the disk's durability (the crash tests kill the writer, not the
# machine), and the tests of a full disk mount a tmpfs of their own. Call it last in the folder.
function(pfr_tests_in_tmpfs)
  if(NOT IS_DIRECTORY /dev/shm)
    return()
  endif()
  get_property(dir_tests DIRECTORY PROPERTY TESTS)
  foreach(t IN LISTS dir_tests)
    set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT TMPDIR=/dev/shm)
  endforeach()
endfunction()
