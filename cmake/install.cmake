include(CMakePackageConfigHelpers)

install(EXPORT weftTargets NAMESPACE weft:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/weft)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/weftConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/weftConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/weft)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/weftConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/weftConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/weftConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/weft)

# The static libraries need what they were built with: UCX and hwloc when found.
set(WEFT_PC_EXTRA_LIBS "")
foreach(lib IN LISTS UCX_LIBRARIES HWLOC_LIBRARIES)
  string(APPEND WEFT_PC_EXTRA_LIBS " -l${lib}")
endforeach()
file(RELATIVE_PATH WEFT_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
configure_file(${CMAKE_CURRENT_LIST_DIR}/weft.pc.in ${CMAKE_CURRENT_BINARY_DIR}/weft.pc @ONLY)
# weft-c: the shared library, which carries its dependencies itself.
configure_file(${CMAKE_CURRENT_LIST_DIR}/weft-c.pc.in ${CMAKE_CURRENT_BINARY_DIR}/weft-c.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/weft.pc ${CMAKE_CURRENT_BINARY_DIR}/weft-c.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
