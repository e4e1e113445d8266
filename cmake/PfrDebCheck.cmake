# CPACK_PROJECT_CONFIG_FILE of cmake/Packaging.cmake, read by cpack before it builds a package:
# the .deb is only right from a tree whose config files go to /etc (the programs, units and
# conffiles list name /etc/pfr).
if(CPACK_GENERATOR STREQUAL "DEB" AND NOT CPACK_PFR_SYSCONFDIR STREQUAL "/etc")
  message(FATAL_ERROR "pfr's .deb needs a build tree configured with -DCMAKE_INSTALL_PREFIX=/usr "
    "-DCMAKE_INSTALL_SYSCONFDIR=/etc (this one has CMAKE_INSTALL_SYSCONFDIR=${CPACK_PFR_SYSCONFDIR})")
endif()
