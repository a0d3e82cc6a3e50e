# libweft.so.N: comm and the layers below it, with the C API, as one shared library (SONAME
# libweft.so.<major>) that exports only the public API: the C API (weft.h) and comm's public
# C++ classes. The static libraries stay as they are.
#
# Every library is compiled with hidden visibility, and a linker can only narrow what is visible:
# so the few files that define the public C++ API are compiled with default visibility, and the
# version script (libweft.map) names what leaves the library. weft.h marks its functions itself.
set(_weft_public_cxx
  ${PROJECT_SOURCE_DIR}/comm/src/communicator.cc
  ${PROJECT_SOURCE_DIR}/comm/src/communicator_create.cc
  ${PROJECT_SOURCE_DIR}/comm/src/engine.cc  # weft::Work
  ${PROJECT_SOURCE_DIR}/comm/src/shared_buffers.cc
  ${PROJECT_SOURCE_DIR}/comm/src/store_rendezvous.cc)
set_source_files_properties(${_weft_public_cxx} DIRECTORY ${PROJECT_SOURCE_DIR}/comm
  PROPERTIES COMPILE_OPTIONS -fvisibility=default)
set_source_files_properties(${PROJECT_SOURCE_DIR}/kernels/src/dtype.cc
  DIRECTORY ${PROJECT_SOURCE_DIR}/kernels PROPERTIES COMPILE_OPTIONS -fvisibility=default)

add_library(weft SHARED ${PROJECT_SOURCE_DIR}/comm/src/c_api_library.cc)
add_library(weft::weft ALIAS weft)
target_compile_definitions(weft PRIVATE
  WEFT_PROJECT_VERSION_MAJOR=${PROJECT_VERSION_MAJOR}
  WEFT_PROJECT_VERSION_MINOR=${PROJECT_VERSION_MINOR}
  WEFT_PROJECT_VERSION_PATCH=${PROJECT_VERSION_PATCH})
set(_weft_archives weft_comm weft_bootstrap weft_topology weft_kernels)
# Whole archives: nothing in the library itself refers to what it must export.
target_link_libraries(weft
  PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,${_weft_archives}>"
  PUBLIC absl::status absl::statusor absl::time)
foreach(archive IN LISTS _weft_archives)
  set_property(TARGET weft PROPERTY LINK_LIBRARY_OVERRIDE_${archive} WHOLE_ARCHIVE)
endforeach()
target_include_directories(weft PUBLIC
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/comm/include>
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/kernels/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
set(_weft_map ${CMAKE_CURRENT_LIST_DIR}/libweft.map)
target_link_options(weft PRIVATE -Wl,--version-script=${_weft_map} -Wl,--no-undefined)
set_target_properties(weft PROPERTIES
  OUTPUT_NAME weft
  EXPORT_NAME weft
  VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR}
  LINK_DEPENDS ${_weft_map})
install(TARGETS weft EXPORT weftTargets)
