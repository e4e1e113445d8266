# The Debian package: `cmake --build B --target package` (or `cpack --config B/CPackConfig.cmake`)
# writes B/pfr_<version>_amd64.deb from what `cmake --install` puts in place, with the maintainer
# scripts of packaging/deb/. B must be configured for a /usr + /etc install
# (-DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_SYSCONFDIR=/etc): the units, config files and
# tmpfiles.d entries name those paths, and `cpack` refuses another layout. A different version,
# e.g. for an upgrade test: cpack -D CPACK_PACKAGE_VERSION=0.1.1.
set(PFR_DEB_MAINTAINER "pfr maintainers <maintainers@users.noreply.a-seed-0ef742be.example>"
  CACHE STRING "Maintainer field of the Debian package")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME pfr)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "offline-first continuous profiler (eBPF CPU, Go heap, pprof)")
# Lines as they appear in the control file (CPack indents them).
set(CPACK_PACKAGE_DESCRIPTION "\
pfr-recorder samples every CPU with eBPF and reads Go heap and pprof profiles
into a local SQLite + LZ4 ring of bounded size; pfr-shipper forwards the ring
to Coroot or its ClickHouse whenever the link allows; pfr queries the ring on
the host itself, with no network (flame graphs, comparisons, pprof export).
.
Installing enables and starts nothing: see /usr/share/doc/pfr/operations.md.")
# Packaged with the paths the programs and units expect; the DESTDIR keeps the staging folder
# out of the paths written into the units.
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_SET_DESTDIR ON)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${PFR_DEB_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Library dependencies from the programs as linked (dpkg-shlibdeps); adduser for the maintainer
# scripts where systemd-sysusers is missing.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS adduser)

# The maintainer scripts name the sysusers.d and tmpfiles.d files where this tree installs them.
cmake_path(ABSOLUTE_PATH PFR_SYSUSERS_DIR BASE_DIRECTORY ${CPACK_PACKAGING_INSTALL_PREFIX}
  OUTPUT_VARIABLE PFR_DEB_SYSUSERS)
cmake_path(ABSOLUTE_PATH PFR_TMPFILES_DIR BASE_DIRECTORY ${CPACK_PACKAGING_INSTALL_PREFIX}
  OUTPUT_VARIABLE PFR_DEB_TMPFILES)
string(APPEND PFR_DEB_SYSUSERS /pfr.conf)
string(APPEND PFR_DEB_TMPFILES /pfr.conf)
set(deb_control ${CMAKE_CURRENT_BINARY_DIR}/deb-control)
foreach(script postinst prerm postrm)
  configure_file(${CMAKE_CURRENT_SOURCE_DIR}/packaging/deb/${script}
    ${deb_control}/${script} @ONLY FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE
    GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
endforeach()
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/packaging/deb/conffiles ${deb_control}/conffiles COPYONLY)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${deb_control}/postinst ${deb_control}/prerm ${deb_control}/postrm ${deb_control}/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

# Debian's copyright file, changelog.gz and the manual pages, staged at cpack time.
set(CPACK_INSTALL_SCRIPTS ${CMAKE_CURRENT_SOURCE_DIR}/cmake/PfrDebFiles.cmake)
set(CPACK_PFR_SOURCE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
set(CPACK_PFR_DOCDIR ${CMAKE_INSTALL_DOCDIR})
# Checked at cpack time (cmake/PfrDebCheck.cmake): a tree for another layout cannot make the .deb.
set(CPACK_PFR_SYSCONFDIR ${CMAKE_INSTALL_SYSCONFDIR})
set(CPACK_PROJECT_CONFIG_FILE ${CMAKE_CURRENT_SOURCE_DIR}/cmake/PfrDebCheck.cmake)
include(CPack)
