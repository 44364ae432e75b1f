# Install rules (like fmt): the libraries with their headers, the locksim command, and a package config so that
# `find_package(locksim)` gives the same locksim:: targets a source build has. tests/install proves it.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(LOCKSIM_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/locksim)
set(locksim_export_targets)
foreach(pair sim:locksim_sim protocols:locksim_protocols redis:locksim_redis raft:locksim_raft dblease:locksim_dblease
        zookeeper:locksim_zookeeper consul:locksim_consul
        builtin_protocols:locksim_builtin_protocols checker:locksim_checker scenarios:locksim_scenarios
        reports:locksim_reports cli:locksim_cli)
  string(REPLACE ":" ";" parts ${pair})
  list(GET parts 0 export_name)
  list(GET parts 1 target)
  if(TARGET ${target})
    set_target_properties(${target} PROPERTIES EXPORT_NAME ${export_name})
    # Installed headers keep their source layout under include/locksim/ and are included from include/ only
    # (<locksim/sim/world.hpp>, <locksim/rapidcheck.hpp>): nothing of ours can shadow a user's own sim/ folder.
    target_include_directories(${target} PUBLIC $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
    list(APPEND locksim_export_targets ${target})
  endif()
endforeach()

install(TARGETS ${locksim_export_targets} EXPORT locksimTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS locksim RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# Header by header (install(DIRECTORY) would also make the folders that hold no header, e.g. the catalog's).
foreach(dir sim protocols scenarios reports)
  file(GLOB_RECURSE headers RELATIVE ${PROJECT_SOURCE_DIR} CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${dir}/*.hpp)
  foreach(h ${headers})
    get_filename_component(hdir ${h} DIRECTORY)
    install(FILES ${PROJECT_SOURCE_DIR}/${h} DESTINATION ${LOCKSIM_INSTALL_INCLUDEDIR}/${hdir})
  endforeach()
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/include/locksim/rapidcheck.hpp ${PROJECT_SOURCE_DIR}/include/locksim/rapidcheck_gtest.hpp
              ${PROJECT_SOURCE_DIR}/include/locksim/cli.hpp
        DESTINATION ${LOCKSIM_INSTALL_INCLUDEDIR})

install(EXPORT locksimTargets NAMESPACE locksim:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/locksim)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/locksimConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/locksimConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/locksim)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/locksimConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/locksimConfig.cmake ${PROJECT_BINARY_DIR}/locksimConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/locksim)
