# mtlinv::mtlinv inside the Python package (mtlinv.get_cmake_dir()): the shared library the package carries,
# found relative to this file, <package>/lib/cmake/mtlinv/. (A CMake install writes its own mtlinvTargets.cmake.)
if(TARGET mtlinv::mtlinv)
  return()
endif()
get_filename_component(_mtlinv_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(APPLE)
  set(_mtlinv_library "${_mtlinv_prefix}/lib/libmtlinv.dylib")
else()
  set(_mtlinv_library "${_mtlinv_prefix}/lib/libmtlinv.so")
endif()
if(NOT EXISTS "${_mtlinv_library}")
  set(${CMAKE_FIND_PACKAGE_NAME}_FOUND FALSE)
  set(${CMAKE_FIND_PACKAGE_NAME}_NOT_FOUND_MESSAGE "the package's library ${_mtlinv_library} is missing")
  return()
endif()
add_library(mtlinv::mtlinv SHARED IMPORTED)
set_target_properties(mtlinv::mtlinv PROPERTIES
  IMPORTED_LOCATION "${_mtlinv_library}"
  INTERFACE_INCLUDE_DIRECTORIES "${_mtlinv_prefix}/include"
  INTERFACE_COMPILE_FEATURES cxx_std_17
  INTERFACE_LINK_LIBRARIES Threads::Threads)
unset(_mtlinv_library)
unset(_mtlinv_prefix)
