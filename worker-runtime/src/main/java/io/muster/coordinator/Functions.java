package io.muster.coordinator;

import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;

/**
 * The functions and resource factories of a job, by name. Build the same registry on every task
 * (the coordinator checks names when scheduling; workers look them up when called).
 */
public final class Functions {

  private final Map<String, RemoteFunction> functions;
  private final Map<String, ResourceFunction> resources;

  private Functions(Map<String, RemoteFunction> functions, Map<String, ResourceFunction> resources) {
    this.functions = Map.copyOf(functions);
    this.resources = Map.copyOf(resources);
  }

  public static Builder builder() {
    return new Builder();
  }

  Optional<RemoteFunction> function(String name) {
    return Optional.ofNullable(functions.get(name));
  }

  Optional<ResourceFunction> resource(String name) {
    return Optional.ofNullable(resources.get(name));
  }

  Set<String> functionNames() {
    return new java.util.TreeSet<>(functions.keySet());
  }

  Set<String> resourceNames() {
    return new java.util.TreeSet<>(resources.keySet());
  }

  public static final class Builder {
    private final Map<String, RemoteFunction> functions = new TreeMap<>();
    private final Map<String, ResourceFunction> resources = new TreeMap<>();

    private Builder() {}

    public Builder function(String name, RemoteFunction function) {
      requireNew(name);
      functions.put(name, function);
      return this;
    }

    public Builder resource(String name, ResourceFunction factory) {
      requireNew(name);
      resources.put(name, factory);
      return this;
    }

    private void requireNew(String name) {
      if (name == null || name.isBlank()) {
        throw new IllegalArgumentException("a function needs a name");
      }
      if (functions.containsKey(name) || resources.containsKey(name)) {
        throw new IllegalArgumentException("function " + name + " is registered twice");
      }
    }

    public Functions build() {
      return new Functions(functions, resources);
    }
  }
}
