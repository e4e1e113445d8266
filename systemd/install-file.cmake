# Run at install time (install(CODE) in CMakeLists.txt): copy one file of this folder to its
# place under the install prefix, rewriting the /usr + /etc paths it holds for that prefix.
# CMAKE_INSTALL_PREFIX here is the prefix of this install (cmake --install --prefix P).
function(pfr_full out dir)
  if(IS_ABSOLUTE "${dir}")
    set(${out} "${dir}" PARENT_SCOPE)
  else()
    set(${out} "${CMAKE_INSTALL_PREFIX}/${dir}" PARENT_SCOPE)
  endif()
endfunction()
pfr_full(bindir "${PFR_BINDIR}")
pfr_full(sbindir "${PFR_SBINDIR}")
pfr_full(sysconfdir "${PFR_SYSCONFDIR}")
pfr_full(docdir "${PFR_DOCDIR}")
pfr_full(destdir "${PFR_DEST_DIR}")

file(READ "${PFR_SRC}" text)
string(REPLACE "/usr/sbin/pfr-recorder" "${sbindir}/pfr-recorder" text "${text}")
string(REPLACE "/usr/bin/pfr-shipper" "${bindir}/pfr-shipper" text "${text}")
string(REPLACE "/etc/pfr/" "${sysconfdir}/pfr/" text "${text}")
string(REPLACE "/usr/share/doc/pfr/" "${docdir}/" text "${text}")

set(out "$ENV{DESTDIR}${destdir}/${PFR_DEST_NAME}")
message(STATUS "Installing: ${out}")
file(WRITE "${out}" "${text}")
