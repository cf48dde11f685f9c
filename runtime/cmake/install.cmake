# `cmake --install` (component deltac): a CMake package (find_package(deltac
# CONFIG REQUIRED) -> deltac::runtime), a pkg-config file (deltac.pc), the
# static libraries and every header a consumer or generated code needs:
# params.h, runtime.h, bind.h, env.h, npy.h, catalogue.h, tuning_db.h and the
# CPU (and CUDA) kernel templates. examples/embed/ is such a consumer.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(DELTAC_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/deltac)
set(inc $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)

# Installed headers all land in include/deltac/.
target_include_directories(deltac_templates INTERFACE ${inc})
target_include_directories(deltac_catalogue INTERFACE ${inc})
target_include_directories(deltac_cpu_headers INTERFACE ${inc})
target_include_directories(deltac_tuning_db PUBLIC ${inc})
target_include_directories(deltac_runtime PUBLIC ${inc})

set_target_properties(deltac_templates PROPERTIES EXPORT_NAME templates)
set_target_properties(deltac_catalogue PROPERTIES EXPORT_NAME catalogue)
set_target_properties(deltac_cpu_kernels PROPERTIES EXPORT_NAME cpu_kernels)
set_target_properties(deltac_cpu_headers PROPERTIES EXPORT_NAME cpu_headers)
set_target_properties(deltac_cpu_isa PROPERTIES EXPORT_NAME cpu_isa)
set_target_properties(deltac_tuning_db PROPERTIES EXPORT_NAME tuning_db)
set_target_properties(deltac_runtime PROPERTIES EXPORT_NAME runtime)
set(DELTAC_EXPORTED deltac_templates deltac_catalogue deltac_cpu_headers
    deltac_cpu_kernels deltac_cpu_isa deltac_tuning_db deltac_runtime)
set(DELTAC_PC_CUDA_LIBS "")
set(DELTAC_CUDA_ROOT "")
if(DELTAC_HAVE_CUDA)
  target_include_directories(deltac_cuda_kernels INTERFACE ${inc})
  set_target_properties(deltac_cuda_kernels PROPERTIES EXPORT_NAME cuda_kernels)
  set_target_properties(deltac_runtime_cuda PROPERTIES EXPORT_NAME runtime_cuda)
  list(APPEND DELTAC_EXPORTED deltac_cuda_kernels deltac_runtime_cuda)
  get_filename_component(DELTAC_CUDA_ROOT "${CUDAToolkit_BIN_DIR}" DIRECTORY)
  set(DELTAC_PC_CUDA_LIBS
      "-ldeltac_runtime_cuda -L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -ldl -lrt -lpthread ")
endif()

install(TARGETS ${DELTAC_EXPORTED} EXPORT deltacTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT deltac
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT deltac
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT deltacTargets NAMESPACE deltac::
  DESTINATION ${DELTAC_CMAKE_DIR} COMPONENT deltac)

foreach(dir templates/include templates/cpu/include templates/cuda/include
        catalogue/include runtime/include)
  if(EXISTS ${PROJECT_SOURCE_DIR}/${dir})
    install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/
      DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT deltac
      FILES_MATCHING PATTERN "*.h" PATTERN "*.cuh")
  endif()
endforeach()

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/deltacConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/deltacConfig.cmake
  INSTALL_DESTINATION ${DELTAC_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/deltacConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
configure_file(${CMAKE_CURRENT_LIST_DIR}/deltac.pc.in
  ${CMAKE_CURRENT_BINARY_DIR}/deltac.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/deltacConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/deltacConfigVersion.cmake
  DESTINATION ${DELTAC_CMAKE_DIR} COMPONENT deltac)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/deltac.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT deltac)

install(TARGETS deltac-run RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  COMPONENT deltac_tools)
