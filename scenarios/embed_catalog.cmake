# Generates a C++ source holding every catalog scenario file, so the locksim binary carries its catalog.
# Inputs: OUT (the .cpp to write), FILES (;-separated list of .toml paths).
set(body "#include \"locksim/scenarios/catalog.hpp\"\nnamespace locksim {\nnamespace {\nconst CatalogEntry kEntries[] = {\n")
list(SORT FILES)
foreach(f IN LISTS FILES)
  get_filename_component(name ${f} NAME_WE)
  file(READ ${f} text)
  string(APPEND body "  {\"${name}\", \"scenarios/catalog/${name}.toml\", R\"locksim_toml(${text})locksim_toml\"},\n")
endforeach()
string(APPEND body "  {\"\", \"\", \"\"},  // end marker (keeps the array non-empty)\n};\n}  // namespace\n")
string(APPEND body "std::span<const CatalogEntry> catalog() { return {kEntries, std::size(kEntries) - 1}; }\n}  // namespace locksim\n")
file(WRITE ${OUT}.tmp "${body}")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
