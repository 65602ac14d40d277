/*
 * A stand-in for Spring Cloud Zookeeper's payload class, compiled with CuratorPeer so that
 * Jackson can resolve "@class": "org.springframework.cloud.zookeeper.discovery.ZookeeperInstance"
 * in a ServiceInstance payload (a Java service would have the real class on its classpath).
 *
 * Only its shape matters, and it matches Spring's: the same package and name, the properties
 * id, name, metadata (a Map<String, String>) declared in that order, which is the order
 * Jackson writes them in, plus getters, setters and a no-argument constructor.
 */

package org.springframework.cloud.zookeeper.discovery;

import java.util.HashMap;
import java.util.Map;

public class ZookeeperInstance {
    private String id;
    private String name;
    private Map<String, String> metadata = new HashMap<>();

    public ZookeeperInstance() {
    }

    public ZookeeperInstance(String id, String name, Map<String, String> metadata) {
        this.id = id;
        this.name = name;
        this.metadata = metadata;
    }

    public String getId() {
        return id;
    }

    public void setId(String id) {
        this.id = id;
    }

    public String getName() {
        return name;
    }

    public void setName(String name) {
        this.name = name;
    }

    public Map<String, String> getMetadata() {
        return metadata;
    }

    public void setMetadata(Map<String, String> metadata) {
        this.metadata = metadata;
    }

    @Override
    public String toString() {
        return "ZookeeperInstance{id='" + id + "', name='" + name + "', metadata=" + metadata + "}";
    }
}
