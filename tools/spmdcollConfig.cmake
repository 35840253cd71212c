# find_package(spmdcoll) in an installed tree (make install or cmake
# --install put this file in PREFIX/lib/cmake/spmdcoll): the targets of the
# top-level CMakeLists.txt, found relative to this file
#   spmdcoll::spmdcoll         PREFIX/include/spmdcoll.h, with Threads::Threads
#   spmdcoll::spmdcoll_fabric  adds SPMDCOLL_LIBFABRIC and libfabric; defined
#                              only when libfabric is found (pkg-config, else
#                              rdma/fabric.h and libfabric in the default paths)
include(CMakeFindDependencyMacro)
set(THREADS_PREFER_PTHREAD_FLAG ON)
find_dependency(Threads)
get_filename_component(_spmdcoll_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT EXISTS "${_spmdcoll_prefix}/include/spmdcoll.h")
  set(spmdcoll_FOUND FALSE)
  set(spmdcoll_NOT_FOUND_MESSAGE "${_spmdcoll_prefix}/include/spmdcoll.h is missing (install with make install or cmake --install)")
  return()
endif()
if(NOT TARGET spmdcoll::spmdcoll)
  add_library(spmdcoll::spmdcoll INTERFACE IMPORTED)
  set_target_properties(spmdcoll::spmdcoll PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${_spmdcoll_prefix}/include"
    INTERFACE_LINK_LIBRARIES Threads::Threads)
endif()

find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(SPMDCOLL_PC_FABRIC QUIET libfabric)
endif()
find_path(SPMDCOLL_FABRIC_INCLUDE_DIR rdma/fabric.h HINTS ${SPMDCOLL_PC_FABRIC_INCLUDE_DIRS})
find_library(SPMDCOLL_FABRIC_LIBRARY fabric HINTS ${SPMDCOLL_PC_FABRIC_LIBRARY_DIRS})
if(SPMDCOLL_FABRIC_INCLUDE_DIR AND SPMDCOLL_FABRIC_LIBRARY AND NOT TARGET spmdcoll::spmdcoll_fabric)
  add_library(spmdcoll::spmdcoll_fabric INTERFACE IMPORTED)
  set_target_properties(spmdcoll::spmdcoll_fabric PROPERTIES
    INTERFACE_COMPILE_DEFINITIONS SPMDCOLL_LIBFABRIC
    INTERFACE_INCLUDE_DIRECTORIES "${SPMDCOLL_FABRIC_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "spmdcoll::spmdcoll;${SPMDCOLL_FABRIC_LIBRARY};${CMAKE_DL_LIBS}") # (dlopen: PMIx)
endif()
