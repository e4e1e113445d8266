# CPACK_INSTALL_SCRIPTS of cmake/Packaging.cmake, run by cpack while it stages the package: what
# Debian wants beside the programs — the copyright file, a changelog.gz (a native package's: one
# entry, the version being packaged) and the manual pages (packaging/man). gzip -9n: maximal
# compression, no file name or time stamp inside.
set(usr "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}")
set(doc "${usr}/${CPACK_PFR_DOCDIR}")
set(mode FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)

function(pfr_gzip file)
  execute_process(COMMAND gzip -9nf "${file}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "gzip -9n ${file} failed")
  endif()
endfunction()

file(COPY "${CPACK_PFR_SOURCE_DIR}/packaging/copyright" DESTINATION "${doc}" ${mode})

# SOURCE_DATE_EPOCH, when set, is the date (string(TIMESTAMP) reads it).
string(TIMESTAMP date "%a, %d %b %Y %H:%M:%S +0000" UTC)
set(version "${CPACK_PACKAGE_VERSION}")
if(CPACK_DEBIAN_PACKAGE_RELEASE)
  string(APPEND version "-${CPACK_DEBIAN_PACKAGE_RELEASE}")
endif()
file(WRITE "${doc}/changelog" "pfr (${version}) unstable; urgency=medium

  * Built from the pfr source tree (its history: the project's git log).

 -- ${CPACK_DEBIAN_PACKAGE_MAINTAINER}  ${date}
")
pfr_gzip("${doc}/changelog")

file(GLOB pages "${CPACK_PFR_SOURCE_DIR}/packaging/man/*.[1-8]")
foreach(page ${pages})
  string(REGEX MATCH "[1-8]$" section "${page}")
  get_filename_component(name "${page}" NAME)
  file(COPY "${page}" DESTINATION "${usr}/share/man/man${section}" ${mode})
  pfr_gzip("${usr}/share/man/man${section}/${name}")
endforeach()
